"""``--oauth``: authorizing the CLI to a protected server.

For a person: a loopback listener on 127.0.0.1 receives the redirect and the browser is opened on
the authorization URL. For CI, ``--oauth-headless`` follows the authorization redirects itself,
which works where the authorization server approves without a person (as test servers do).
Client credentials come from the options or from ``--oauth-config FILE`` (JSON); tokens are kept
in the data folder with ``--oauth-cache`` (owner-only file), never otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from inspector.paths import data_dir, private_dir

if TYPE_CHECKING:
    from sessions.engine import OAuthConfig

__all__ = ["CONFIG_KEYS", "FileStore", "OAuthOptionError", "add_oauth_options", "oauth_config", "wants_oauth"]

# What --oauth-config may hold (everything else is refused, so a typo is not silently ignored).
CONFIG_KEYS = frozenset(
    {
        "client_id",
        "client_secret",
        "client_metadata_url",
        "scope",
        "grant",
        "private_key_pem",
        "signing_algorithm",
        "assertion",
        "idp_token_endpoint",
        "idp_id_token",
        "idp_client_id",
    }
)
CALLBACK_PATH = "/callback"
_WAIT = 300.0


def add_oauth_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("OAuth (servers behind OAuth 2.1)")
    group.add_argument("--oauth", action="store_true", help="authorize when the server asks (401/403)")
    group.add_argument(
        "--client-id", help="a pre-registered client id (default: register, or a metadata document)"
    )
    group.add_argument(
        "--client-secret", help="its secret (prefer --oauth-config: argv is visible to others)"
    )
    group.add_argument("--client-metadata-url", metavar="URL", help="a Client ID Metadata Document URL")
    group.add_argument("--scope", help="scopes to ask for (default: the ones the server names)")
    group.add_argument(
        "--oauth-grant",
        choices=("authorization_code", "client_credentials", "jwt_bearer", "token_exchange"),
        help="the grant (default authorization_code; the others need no person)",
    )
    group.add_argument(
        "--oauth-config",
        metavar="FILE",
        help="JSON with client_id, client_secret, private_key_pem, signing_algorithm, assertion, "
        "idp_token_endpoint, idp_id_token, idp_client_id, scope, grant",
    )
    group.add_argument(
        "--oauth-headless",
        action="store_true",
        help="follow the authorization redirect without a browser (servers that approve by themselves)",
    )
    group.add_argument(
        "--oauth-cache",
        action="store_true",
        help="keep tokens and client registrations in the data folder between runs",
    )


def wants_oauth(opts: argparse.Namespace) -> bool:
    return bool(
        opts.oauth
        or opts.client_id
        or opts.client_secret
        or opts.client_metadata_url
        or opts.oauth_config
        or opts.oauth_grant
        or opts.oauth_headless
    )


class OAuthOptionError(Exception):
    """The OAuth options or their config file are wrong (the CLI exits 1 with this message)."""


def _read_config(path: str) -> dict[str, Any]:
    from inspector.cli.files import read_json

    data = read_json(path, "--oauth-config", OAuthOptionError)
    if not isinstance(data, dict):
        raise OAuthOptionError(f"--oauth-config {path} must hold a JSON object")
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise OAuthOptionError(
            f"--oauth-config {path}: unknown keys {', '.join(unknown)} "
            f"(known: {', '.join(sorted(CONFIG_KEYS))})"
        )
    bad = [key for key, value in data.items() if not isinstance(value, str)]
    if bad:
        raise OAuthOptionError(f"--oauth-config {path}: {', '.join(bad)} must be strings")
    return data


def oauth_config(opts: argparse.Namespace, server_url: str) -> OAuthConfig:
    """The engine's OAuth settings from the options (which win) and the config file."""
    from sessions.engine import GRANTS, OAuthConfig

    data = _read_config(opts.oauth_config) if opts.oauth_config else {}
    for key in ("client_id", "client_secret", "client_metadata_url", "scope"):
        if getattr(opts, key):
            data[key] = getattr(opts, key)
    if opts.oauth_grant:
        data["grant"] = opts.oauth_grant
    grant = data.pop("grant", "authorization_code")
    if grant not in GRANTS:
        raise OAuthOptionError(f"unknown grant {grant!r}; choose one of: {', '.join(GRANTS)}")
    config = OAuthConfig(grant=grant, **data)
    if grant == "authorization_code":
        config.authorizer = HeadlessAuthorizer() if opts.oauth_headless else LoopbackAuthorizer()
    if opts.oauth_cache:
        config.store = FileStore(_cache_path())
    return config


def _cache_path() -> Path:
    """``oauth-tokens.json`` in the app's data folder, kept the owner's alone as the app keeps it."""
    folder = data_dir()
    private_dir(folder)
    return folder / "oauth-tokens.json"


class FileStore:
    """Tokens and registrations per server in one owner-only JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def load(self, key: str) -> dict[str, Any] | None:
        value = self._all().get(key)
        return value if isinstance(value, dict) else None

    def save(self, key: str, data: dict[str, Any]) -> None:
        everything = self._all()
        everything[key] = data
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(everything, fh)


class HeadlessAuthorizer:
    """Follows the authorization URL's redirects until one comes back to our redirect URI."""

    application_type = "native"
    uri = f"http://127.0.0.1{CALLBACK_PATH}"

    async def redirect_uri(self) -> str:
        return self.uri

    async def authorize(self, url: str, state: str) -> str:
        import httpx

        async with httpx.AsyncClient(follow_redirects=False, timeout=30.0) as client:
            for _ in range(10):
                response = await client.get(url)
                location = response.headers.get("location")
                if response.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise _failed(
                        f"the authorization endpoint answered {response.status_code} without a redirect"
                    )
                url = urljoin(url, location)
                if url.startswith(self.uri):
                    return url
        raise _failed("the authorization endpoint redirected more than 10 times")


class LoopbackAuthorizer:
    """A one-shot HTTP listener on 127.0.0.1 and the person's browser (RFC 8252 §7.3)."""

    application_type = "native"

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._uri = ""
        self._arrived: asyncio.Future[str] | None = None

    async def redirect_uri(self) -> str:
        if self._server is None:
            self._arrived = asyncio.get_running_loop().create_future()
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            port = self._server.sockets[0].getsockname()[1]
            self._uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        return self._uri

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
            parts = line.split(" ")
            target = parts[1] if len(parts) > 2 else ""
            ok = urlsplit(target).path == CALLBACK_PATH
            body = (
                b"<!doctype html><title>Authorized</title><p>Authorization received: you can close this "
                b"tab and go back to the terminal.</p>"
                if ok
                else b"not found"
            )
            status = b"200 OK" if ok else b"404 Not Found"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await writer.drain()
            if ok and self._arrived is not None and not self._arrived.done():
                self._arrived.set_result(urljoin(self._uri, target))
        writer.close()

    async def authorize(self, url: str, state: str) -> str:
        await self.redirect_uri()
        assert self._arrived is not None and self._server is not None
        print(f"Open this URL to authorize (waiting {int(_WAIT)} s):\n  {url}", file=sys.stderr, flush=True)
        import webbrowser

        with contextlib.suppress(Exception):
            webbrowser.open(url)
        try:
            return await asyncio.wait_for(asyncio.shield(self._arrived), _WAIT)
        except TimeoutError:
            raise _failed(f"no authorization came back within {int(_WAIT)} s") from None
        finally:
            self._server.close()
            self._server = None


def _failed(message: str) -> Exception:
    from sessions.engine import OAuthFailed

    return OAuthFailed(message)
