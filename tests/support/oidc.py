"""The single sign-on tests' OpenID Connect provider (tests/support/oidc_provider/) and a person at it.

The provider runs as its own process on a free port and is reached as ``http://localhost:PORT`` while the
inspector is reached as ``http://127.0.0.1:PORT``: two sites, so a browser treats the provider's redirect
back as the cross-site navigation it is in production.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import httpx

from support.processes import free_port, start_http_server

TESTS_DIR = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"


@dataclasses.dataclass(frozen=True)
class Provider:
    issuer: str
    client_id: str
    client_secret: str


@contextlib.contextmanager
def start_provider(
    data_dir: Path, redirect_uris: Sequence[str], people: Sequence[dict]
) -> Iterator[Provider]:
    """Run the test provider with one confidential client (PKCE required) and ``people`` (password
    PASSWORD unless given); stop it after."""
    port = free_port()
    issuer = f"http://localhost:{port}/o"
    provider = Provider(issuer, "mcp-inspector-test", "client-secret-for-tests")
    config = {
        "client_id": provider.client_id,
        "client_secret": provider.client_secret,
        "redirect_uris": list(redirect_uris),
        "people": [{"password": PASSWORD, **person} for person in people],
    }
    argv = [sys.executable, "-m", "support.oidc_provider", str(port), json.dumps(config)]
    env = {"OIDC_PROVIDER_DIR": str(data_dir), "OIDC_PROVIDER_ISSUER": issuer, "PYTHONPATH": str(TESTS_DIR)}
    with start_http_server(argv, port, env=env):
        yield provider


class _Form(HTMLParser):
    """The first form of a page: its action and its fields' values."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form" and self.action is None:
            self.action = values.get("action", "")
        elif tag == "input" and "name" in values:
            self.fields[values["name"]] = values.get("value", "")


def sign_in_at_provider(
    authorization_url: str, username: str, callback: str, password: str = PASSWORD
) -> str:
    """Do what a person does at the provider: follow it to its login form, sign in, and return the URL
    it sends the browser back to (which starts with ``callback``)."""
    with httpx.Client(timeout=10) as client:
        url = authorization_url
        signed_in = False
        for _hop in range(10):
            if url.startswith(callback):
                return url
            response = client.get(url)
            if response.is_redirect:
                url = urljoin(url, response.headers["Location"])
                continue
            assert response.status_code == 200, f"{url}: {response.status_code} {response.text[:500]}"
            assert not signed_in, f"the provider asked again after signing in: {response.text[:500]}"
            form = _Form()
            form.feed(response.text)
            assert form.action is not None, f"no form at {url}: {response.text[:500]}"
            posted = client.post(
                urljoin(url, form.action), data={**form.fields, "username": username, "password": password}
            )
            assert posted.is_redirect, f"signing in at the provider failed: {posted.text[:500]}"
            signed_in = True
            url = urljoin(url, posted.headers["Location"])
        raise AssertionError(f"the provider never sent the browser back to {callback}")
