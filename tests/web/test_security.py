"""Security baseline: token login, login everywhere, same origin only, CSRF, CSP, cookies, safe GETs.

alice is an existing user; the token login logs in the local user named after the OS account.
"""

from __future__ import annotations

import getpass
import hmac
import json
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern
from support.teams import team_of
from support.web import finish

from inspector import auth
from inspector.__main__ import access_log
from inspector.asgi import application
from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, PendingReview, ServerConfig, TimelineFrame

FOREIGN = "http://evil.example"
SAME_ORIGIN = "http://testserver"
# Single sign-on's pages: public too, and not there (404) unless it is set up (tests/hosted/test_sso.py).
SSO_PATHS = {"/auth/oidc/login", "/auth/oidc/callback"}
# Pages anyone may open, with what they answer a bare GET in the local mode; everything else needs a login.
PUBLIC_PATHS = {
    "/healthz": 200,
    "/auth/login": 200,
    "/auth/token": 200,
    "/auth/invite": 404,  # invitations are the hosted mode's (tests/web/test_accounts.py)
    **dict.fromkeys(SSO_PATHS, 404),
    # The OAuth redirect back: with no state there is nothing to take (tests/web/test_oauth_web.py).
    "/oauth/callback": 400,
}


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    """The armed one-time token of a fresh LoginToken (not INSPECTOR_TOKEN)."""
    monkeypatch.delenv("INSPECTOR_TOKEN", raising=False)
    monkeypatch.setattr(auth, "login_token", auth.LoginToken())
    return auth.login_token.issue()


@pytest.fixture
def alice(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def alice_client(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def is_logged_in(client: Client) -> bool:
    return SESSION_KEY in client.session


# --- login ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_anonymous_get_of_home_redirects_to_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/auth/login?next=/"


@pytest.mark.django_db
def test_login_page_tells_to_open_the_printed_url_and_offers_a_paste_form(client: Client, token: str) -> None:
    response = client.get("/auth/login?next=/")
    assert response.status_code == 200
    assert b"printed in the terminal" in response.content
    assert b'name="token"' in response.content
    assert token.encode() not in response.content
    assert response["Referrer-Policy"] == "strict-origin"


@pytest.mark.django_db
def test_token_page_get_has_no_side_effects_and_does_not_log_in(client: Client, token: str) -> None:
    response = client.get("/auth/token", {"token": token})
    assert response.status_code == 200
    assert response["Referrer-Policy"] == "strict-origin"
    assert "no-store" in response["Cache-Control"]
    # A form that POSTs the token, submitted by our own script (the CSP allows no inline script).
    assert re.search(rb'<form id="token-login" method="post" action="/auth/token">', response.content)
    assert f'value="{token}"'.encode() in response.content
    assert b'src="/static/inspector/login.js"' in response.content
    assert not is_logged_in(client)
    assert User.objects.count() == 0
    # Nor did it burn the token.
    assert client.post("/auth/token", {"token": token}).status_code == 302


@pytest.mark.django_db
def test_the_token_form_posted_by_a_browser_with_its_origin_logs_in(token: str) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get("/auth/token", {"token": token})
    csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert csrf is not None
    data = {"token": token, "csrfmiddlewaretoken": csrf[1].decode()}
    headers = {"Origin": SAME_ORIGIN, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate"}
    assert client.post("/auth/token", data, headers=headers).status_code == 302


@pytest.mark.django_db
def test_the_right_token_logs_in_rotates_the_session_and_redirects_home(client: Client, token: str) -> None:
    client.get("/auth/login")
    before = client.cookies.get(settings.SESSION_COOKIE_NAME)

    response = client.post("/auth/token", {"token": token})

    assert response.status_code == 302
    assert response["Location"] == "/"
    assert is_logged_in(client)
    assert client.cookies[settings.SESSION_COOKIE_NAME].value != (before.value if before else None)
    user = User.objects.get()
    assert user.username == getpass.getuser()
    assert not user.has_usable_password()
    assert client.get("/").status_code == 200


@pytest.mark.django_db
def test_the_token_cannot_be_used_twice(client: Client, token: str) -> None:
    assert client.post("/auth/token", {"token": token}).status_code == 302

    other = Client()
    response = other.post("/auth/token", {"token": token})
    assert response.status_code == 403
    assert not is_logged_in(other)


@pytest.mark.django_db
def test_a_wrong_token_is_refused_with_a_form_error_and_leaves_the_right_one_usable(
    client: Client, token: str
) -> None:
    response = client.post("/auth/token", {"token": token + "x", "next": "/"})
    assert response.status_code == 403
    assert b"That token is not valid" in response.content
    assert not is_logged_in(client)
    assert client.post("/auth/token", {}).status_code == 403

    assert client.post("/auth/token", {"token": token}).status_code == 302


@pytest.mark.django_db
def test_the_token_is_compared_in_constant_time(
    client: Client, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, Any]] = []
    compare_digest = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return compare_digest(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    client.post("/auth/token", {"token": "wrong"})
    assert len(calls) == 1


@pytest.mark.django_db
def test_without_inspector_token_or_issue_no_token_logs_in(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INSPECTOR_TOKEN", raising=False)
    monkeypatch.setattr(auth, "login_token", auth.LoginToken())
    assert client.post("/auth/token", {"token": ""}).status_code == 403
    assert client.post("/auth/token", {"token": "anything"}).status_code == 403


@pytest.mark.django_db
def test_inspector_token_fixes_the_token_for_runserver_and_still_works_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INSPECTOR_TOKEN", "dev-token")
    monkeypatch.setattr(auth, "login_token", auth.LoginToken())
    assert Client().post("/auth/token", {"token": "dev-token"}).status_code == 302
    assert Client().post("/auth/token", {"token": "dev-token"}).status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("next_url", "location"),
    [("/healthz", "/healthz"), ("https://evil.example/", "/"), ("//evil.example/", "/"), ("", "/")],
)
def test_after_login_it_follows_next_only_within_the_site(
    client: Client, token: str, next_url: str, location: str
) -> None:
    response = client.post("/auth/token", {"token": token, "next": next_url})
    assert response["Location"] == location


# --- origins, fetch metadata, CSRF ----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("path", ["/", "/healthz", "/auth/login", "/auth/token", "/static/inspector/app.css"])
@pytest.mark.parametrize("origin", [FOREIGN, "null", "http://testserver:8000", "https://testserver"])
def test_a_foreign_origin_is_refused_whatever_the_method(
    alice_client: Client, method: str, path: str, origin: str
) -> None:
    response = getattr(alice_client, method)(path, HTTP_ORIGIN=origin)
    assert response.status_code == 403
    assert "Content-Security-Policy" in response


@pytest.mark.django_db
def test_the_same_origin_is_let_through(alice_client: Client) -> None:
    assert alice_client.get("/", HTTP_ORIGIN=SAME_ORIGIN).status_code == 200
    assert alice_client.get("/healthz", HTTP_ORIGIN=SAME_ORIGIN).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_requests_from_other_sites_or_ports_are_refused_except_navigations(
    alice_client: Client, site: str
) -> None:
    def fetch(method: str, mode: str) -> int:
        headers = {"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode}
        return getattr(alice_client, method)("/", headers=headers).status_code

    assert fetch("post", "navigate") == 403
    assert fetch("get", "cors") == 403
    assert fetch("get", "no-cors") == 403
    assert fetch("get", "navigate") == 200


@pytest.mark.django_db
def test_same_origin_and_user_typed_requests_are_let_through(alice_client: Client) -> None:
    fetch = alice_client.get("/", HTTP_SEC_FETCH_SITE="same-origin", HTTP_SEC_FETCH_MODE="cors")
    assert fetch.status_code == 200
    typed = alice_client.get("/", HTTP_SEC_FETCH_SITE="none", HTTP_SEC_FETCH_MODE="navigate")
    assert typed.status_code == 200


@pytest.mark.django_db
def test_post_without_csrf_token_is_refused(token: str) -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.post("/auth/token", {"token": token}).status_code == 403
    assert not is_logged_in(client)

    # With the token from the page (and its cookie), the same POST works.
    page = client.get("/auth/token", {"token": token})
    csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert csrf is not None
    data = {"token": token, "csrfmiddlewaretoken": csrf.group(1).decode()}
    assert client.post("/auth/token", data).status_code == 302


@pytest.mark.django_db
def test_htmx_requests_carry_the_csrf_token(alice_client: Client) -> None:
    response = alice_client.get("/")
    assert re.search(rb"""<body[^>]* hx-headers='\{"X-CSRFToken": "[^"]+"\}'""", response.content)


# The websocket stack closes stale database connections on every message.
@pytest.mark.django_db(transaction=True)
async def test_a_websocket_with_a_foreign_or_missing_origin_is_rejected() -> None:
    with anyio.fail_after(5):
        for headers in ([(b"origin", FOREIGN.encode())], [(b"origin", b"null")], []):
            communicator = WebsocketCommunicator(application, "/ws/health/", headers=headers)
            # The origin validator refuses before any consumer runs: a plain close, no session data.
            assert await communicator.connect() == (False, 1000), headers
            await communicator.disconnect()


# --- headers and cookies --------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/healthz", "/auth/login", "/auth/token"])
def test_pages_carry_a_strict_content_security_policy(alice_client: Client, path: str) -> None:
    policy = alice_client.get(path)["Content-Security-Policy"]
    directives = {d.split()[0]: d.split()[1:] for d in policy.split("; ")}
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'", "ws://testserver"]
    assert directives["img-src"] == ["'self'", "data:"]
    assert directives["media-src"] == ["'self'", "data:"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


@pytest.mark.django_db
def test_session_and_csrf_cookies_are_httponly_strict_and_named_for_the_inspector(
    client: Client, token: str
) -> None:
    client.get("/auth/token", {"token": token})
    client.post("/auth/token", {"token": token})

    session = client.cookies["mcp_inspector_session"]
    assert session["httponly"]
    assert session["samesite"] == "Strict"
    csrf = client.cookies["mcp_inspector_csrftoken"]
    assert csrf["samesite"] == "Strict"
    assert "sessionid" not in client.cookies
    assert "csrftoken" not in client.cookies


def test_debug_is_off_by_default() -> None:
    assert settings.DEBUG is False


# --- logs -----------------------------------------------------------------------------------------


def test_query_strings_are_redacted_from_log_messages() -> None:
    details = {"method": "GET", "path": "/auth/token?token=s3cret", "status": 200}
    message = "HTTP %(method)s %(path)s %(status)s"
    record = logging.LogRecord("django.channels.server", logging.INFO, __file__, 1, message, (details,), None)
    assert auth.RedactQueryStrings().filter(record)
    assert record.getMessage() == "HTTP GET /auth/token?[redacted] 200"

    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "Is it up? %s", ("yes",), None)
    auth.RedactQueryStrings().filter(plain)
    assert plain.getMessage() == "Is it up? yes"


def test_the_access_log_leaves_out_query_strings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="inspector.access"):
        details = {"method": "GET", "path": "/auth/token?token=s3cret", "status": 200, "client": "::1"}
        access_log("http", "complete", details)
        access_log("websocket", "connected", {"path": "/ws/health/?t=s3cret", "client": "127.0.0.1:5"})
    assert "/auth/token" in caplog.text
    assert "s3cret" not in caplog.text


# --- every URL: login required, no side effects on GET --------------------------------------------

# Sample values for path converters. The walk seeds alice's session under SAMPLE_SESSION with a
# saved server, a request and its answer (rpc id 1, frames 1 and 2) and a waiting review (pk 1), so
# the pages under /s/<uuid>/ render for real instead of answering 404.
SAMPLE_SESSION = "5e551011-0000-4000-8000-000000000001"
_SAMPLES = {
    "int": "1",
    "str": "tools",
    "slug": "x",
    "path": "x",
    "uuid": SAMPLE_SESSION,
}
_CONVERTER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


def _concrete(pattern: RoutePattern | RegexPattern | Any) -> str | None:
    """Return a URL piece that pattern matches, or None if we cannot make one."""
    if isinstance(pattern, RoutePattern):
        route = str(pattern)

        def sample(match: re.Match[str]) -> str:
            return _SAMPLES.get(match["converter"] or "str", "\0")

        concrete = _CONVERTER.sub(sample, route)
        return None if "\0" in concrete else concrete
    regex = str(pattern).removeprefix("^").removesuffix("$").removesuffix(r"\Z")
    return None if any(c in regex for c in "()[]{}*+?|\\.") else regex


def _walk(patterns: list[URLPattern | URLResolver], prefix: str = "/") -> Iterator[str]:
    for entry in patterns:
        piece = _concrete(entry.pattern)
        if piece is None:
            continue
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + piece)
        else:
            yield prefix + piece


def all_paths() -> list[str]:
    return sorted(set(_walk(get_resolver().url_patterns)))


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
    }


def test_the_url_walk_finds_the_project_pages() -> None:
    assert {"/", "/healthz", "/auth/login", "/auth/token"} <= set(all_paths())


def seed_session(owner: User) -> McpSession:
    """A closed session of ``owner`` with something behind each sample id the URL walk uses."""
    server = ServerConfig.objects.create(
        pk=1, owner=owner, team=team_of(owner), name="everything", command="node"
    )
    session = McpSession.objects.create(
        public_id=uuid.UUID(SAMPLE_SESSION),
        owner=owner,
        team=team_of(owner),
        server=server,
        name="everything",
        status="closed",
    )
    call = {"name": "echo", "arguments": {"message": "hi"}}
    answer = {"contents": [{"uri": "demo://blob", "blob": "aGk="}]}
    frames = [
        Frame(
            "message",
            "out",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode(),
        ),
        Frame("message", "in", json.dumps({"jsonrpc": "2.0", "id": 1, "result": answer}).encode()),
    ]
    for seq, (frame, kind) in enumerate(zip(frames, ("request", "result"), strict=True), start=1):
        frame.seq, frame.rpc_kind, frame.rpc_id, frame.method = seq, kind, 1, "tools/call"
        TimelineFrame.objects.create(session=session, **frame_row(frame, 0))
    PendingReview.objects.create(
        pk=1, session=session, key="k", method="roots/list", rpc_id="7", params={}, frame_seq=2
    )
    session.last_seq = 2
    session.save()
    return session


@pytest.mark.django_db
@pytest.mark.parametrize("path", all_paths())
def test_no_get_changes_the_database(alice_client: Client, alice: User, path: str) -> None:
    seed_session(alice)
    before = row_counts()
    response = alice_client.get(path)
    finish(response)
    # 400: a fragment that validates its query string with a Form, given none.
    assert response.status_code in (200, 204, 302, 400, 404, 405), path
    assert row_counts() == before, path
    if path in (f"/s/{SAMPLE_SESSION}/", f"/s/{SAMPLE_SESSION}/frames/1", f"/s/{SAMPLE_SESSION}/export"):
        assert response.status_code == 200, path  # the walk reached a real session


@pytest.mark.django_db
@pytest.mark.parametrize("path", all_paths())
def test_every_page_but_health_and_login_needs_a_login(client: Client, path: str) -> None:
    before = row_counts()
    response = client.get(path)
    finish(response)
    if path in PUBLIC_PATHS:
        assert response.status_code == PUBLIC_PATHS[path], path
    elif path.startswith(("/shared/", "/shared-item/")):
        # A share link's view needs its token, not a login (tests/web/test_shares.py): this one is unknown.
        assert response.status_code == 404 and b"No such share link" in response.content, path
    else:
        assert response.status_code == 302, path
        assert response["Location"].startswith("/auth/login?next="), path
    assert row_counts() == before, path
