"""The engine's OAuth against real protected servers on 127.0.0.1: a server built with the `mcp`
Python SDK's authorization support (tests/servers/oauth_sdk_server.py) and the TypeScript SDK's
example server with ``--oauth`` (npm). The whole flow, refresh, step-up, stored tokens, secrets
kept out of every frame, and a verdict on each MUST a misbehaving server breaks. Only the
plain-HTTP authorization server on another host is scripted (nothing here can be non-loopback).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.engine import EventLog
from support.oauth import (
    MemoryStore,
    ProtectedServer,
    TestAuthorizer,
    leaked,
    oauth_sdk_server,
    ts_example_server,
)

from sessions.engine import ClientOptions, ClientSession, Frame, HttpTarget, OAuthConfig, connect
from sessions.engine._streamable import StreamableHttpTransport
from sessions.engine.testing import ManualClock, mock_http

pytestmark = pytest.mark.slow

JSONRPC_CODES = {"jsonrpc-version", "not-jsonrpc", "invalid-json"}


@pytest.fixture(scope="module")
def server() -> Iterator[ProtectedServer]:
    with oauth_sdk_server() as running:
        yield running


class Clock:
    """A wall clock a test moves forward (token expiry without waiting)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def session_for(url: str, **config: Any) -> tuple[ClientSession, EventLog]:
    session = connect(
        HttpTarget(url, transport="http", oauth=OAuthConfig(**config)), ClientOptions(timeout=20)
    )
    return session, EventLog(session)


def oauth_steps(log: EventLog) -> list[str]:
    """The flow's state frames, by step, in order."""
    return [
        f.transport["oauth"]["step"]
        for f in log.frames
        if f.kind == "state" and isinstance(f.transport.get("oauth"), dict)
    ]


def exchanges(log: EventLog, step: str) -> list[Frame]:
    """The flow's outgoing HTTP requests of one step."""
    return [
        f
        for f in log.frames
        if f.kind == "http" and f.direction == "out" and f.transport.get("http", {}).get("oauth") == step
    ]


def refusals(log: EventLog) -> list[Frame]:
    """The MCP server's 401 and 403 response heads (not the flow's own exchanges)."""
    return [
        f
        for f in log.frames
        if f.kind == "http"
        and f.direction == "in"
        and f.transport["http"].get("status") in (401, 403)
        and "oauth" not in f.transport["http"]
    ]


def errors(log: EventLog) -> list[tuple[str, str]]:
    return [(v.code, v.message) for f in log.frames for v in f.verdicts if v.severity == "error"]


async def whoami(session: ClientSession) -> dict[str, Any]:
    result = await session.call_tool("whoami", {})
    return dict(result["structuredContent"])


# --- the Python SDK's server ------------------------------------------------------------------------------


async def test_the_whole_flow_discovers_registers_authorizes_and_sends_the_token(
    server: ProtectedServer,
) -> None:
    before = server.counts()
    authorizer = TestAuthorizer()
    session, log = session_for(server.url, authorizer=authorizer)
    async with session:
        me = await whoami(session)
    assert me["scopes"] == ["mcp:tools", "offline_access"]
    assert oauth_steps(log) == [
        "resource-metadata",
        "authorization-server",
        "client",
        "authorization",  # the request
        "authorization",  # the response
        "token",
    ]
    # Discovery from the challenge's resource_metadata, then RFC 8414 at the issuer; then DCR.
    [prm] = exchanges(log, "resource-metadata")
    assert prm.transport["http"]["url"] == server.url.replace(
        "/mcp", "/.well-known/oauth-protected-resource/mcp"
    )
    [meta] = exchanges(log, "authorization-server")
    assert meta.transport["http"]["url"] == f"{server.auth_url}/.well-known/oauth-authorization-server"
    [register] = exchanges(log, "client")
    assert register.transport["http"]["url"] == f"{server.auth_url}/register"
    assert json.loads(register.raw)["redirect_uris"] == ["http://127.0.0.1/callback"]
    # PKCE S256, the resource indicator, the PRM's scopes plus offline_access (the server lists it).
    asked = authorizer.params()
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert asked["resource"] == server.url
    assert asked["scope"] == "mcp:tools offline_access"
    assert asked["state"] and asked["redirect_uri"] == "http://127.0.0.1/callback"
    after = server.counts()
    assert after["authorizations"] - before["authorizations"] == 1
    assert after["registrations"] - before["registrations"] == 1
    # The first POST was refused once, then sent again with the token (masked in the record).
    [refused] = refusals(log)
    assert refused.transport["http"]["status"] == 401
    again = [
        f for f in log.frames if f.note and f.note.startswith("send message #") and "authorized" in f.note
    ]
    assert again and again[0].transport["http"]["headers"]["Authorization"].startswith("Bearer ••••")
    assert errors(log) == []


async def test_a_401_draws_no_json_rpc_verdict_and_its_challenge_is_readable(server: ProtectedServer) -> None:
    session, log = session_for(server.url, authorizer=TestAuthorizer())
    async with session:
        await whoami(session)
    [refused] = refusals(log)
    assert b"invalid_token" in refused.raw  # the body is kept, as an HTTP body
    challenge = refused.transport["http"]["headers"]["www-authenticate"]
    assert 'resource_metadata="http://127.0.0.1:' in challenge and "••••" not in challenge
    assert not {v.code for f in log.frames for v in f.verdicts} & JSONRPC_CODES


async def test_a_token_about_to_expire_is_refreshed_before_the_request(server: ProtectedServer) -> None:
    clock = Clock()
    authorizer = TestAuthorizer()
    session, log = session_for(server.url, authorizer=authorizer, now=clock)
    async with session:
        first = await whoami(session)
        before = server.counts()
        clock.offset = 3600  # the token's expires_in has passed on the client's clock
        mark = len(log.frames)
        second = await whoami(session)
    after = server.counts()
    assert second["serial"] != first["serial"]
    assert after["refresh_token"] - before["refresh_token"] == 1
    assert after["authorizations"] == before["authorizations"] and len(authorizer.urls) == 1
    later = log.frames[mark:]
    # The call's POST waited for the refresh (the message frame is recorded as it is sent, before its
    # POST), went out once with the new token, and was never refused.
    refresh = [f for f in later if f.transport.get("http", {}).get("oauth") == "refresh"]
    call = next(f for f in later if f.method == "tools/call")
    answer = next(f for f in later if f.direction == "in" and f.rpc_id == call.rpc_id and f.kind == "message")
    assert refresh and call.seq < refresh[0].seq < answer.seq
    assert b"grant_type=refresh_token" in refresh[0].raw
    assert not [f for f in later if f in refusals(log)]
    assert errors(log) == []


async def test_a_revoked_token_is_refreshed_when_the_server_answers_401(server: ProtectedServer) -> None:
    authorizer = TestAuthorizer()
    session, log = session_for(server.url, authorizer=authorizer)
    async with session:
        first = await whoami(session)
        await session.call_tool("revoke_my_token", {})
        before = server.counts()
        second = await whoami(session)
    after = server.counts()
    assert second["serial"] != first["serial"]
    assert after["refresh_token"] - before["refresh_token"] == 1
    assert after["authorizations"] == before["authorizations"] and len(authorizer.urls) == 1
    assert [f.transport["http"]["status"] for f in refusals(log)] == [401, 401]


async def test_a_tool_needing_another_scope_steps_up_with_the_union_of_scopes(
    server: ProtectedServer,
) -> None:
    authorizer = TestAuthorizer()
    session, log = session_for(server.url, authorizer=authorizer)
    async with session:
        await whoami(session)
        report = await session.call_tool("admin_report", {})
        me = await whoami(session)
    assert report["content"][0]["text"] == "admin report: all well"
    assert len(authorizer.urls) == 2
    assert authorizer.params(1)["scope"].split() == ["mcp:tools", "offline_access", "mcp:admin"]
    assert set(me["scopes"]) == {"mcp:tools", "offline_access", "mcp:admin"}
    [_, forbidden] = refusals(log)
    assert forbidden.transport["http"]["status"] == 403
    assert 'error="insufficient_scope"' in forbidden.transport["http"]["headers"]["www-authenticate"]
    assert errors(log) == []


class SlowPerson(TestAuthorizer):
    """A person who takes ten minutes of the session's clock to authorize (a manual clock: no wait)."""

    __test__ = False

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.fired: list[int] = []

    async def authorize(self, url: str, state: str) -> str:
        self.fired.append(self.clock.advance(600))
        return await super().authorize(url, state)


async def test_a_request_waiting_for_the_person_to_authorize_does_not_time_out(
    server: ProtectedServer,
) -> None:
    clock = ManualClock()
    person = SlowPerson(clock)
    target = HttpTarget(server.url, transport="http", oauth=OAuthConfig(authorizer=person))
    session = connect(target, ClientOptions(timeout=60, clock=clock))
    async with session:  # initialize, refused until the person has authorized
        assert (await whoami(session))["scopes"] == ["mcp:tools", "offline_access"]
    assert person.fired == [0]  # initialize's clocks stood still while the person took their time


async def test_a_server_that_never_grants_enough_stops_at_the_retry_limit(server: ProtectedServer) -> None:
    authorizer = TestAuthorizer()
    session, log = session_for(server.url, authorizer=authorizer, max_authorizations=2)
    async with session:
        await whoami(session)
        with pytest.raises(Exception, match="HTTP 403"):
            await session.call_tool("never_enough", {})
        # The session goes on: other tools still work with the token it has.
        assert (await whoami(session))["serial"]
    assert len(authorizer.urls) == 1 + 2
    assert [v.code for f in log.frames for v in f.verdicts if v.code == "oauth-retry-limit"] == [
        "oauth-retry-limit"
    ]


async def test_stored_tokens_are_used_without_a_new_authorization(server: ProtectedServer) -> None:
    store = MemoryStore()
    first_run = TestAuthorizer()
    session, _ = session_for(server.url, authorizer=first_run, store=store)
    async with session:
        first = await whoami(session)
    assert len(first_run.urls) == 1 and store.data
    before = server.counts()
    second_run = TestAuthorizer()
    session, log = session_for(server.url, authorizer=second_run, store=store)
    async with session:
        second = await whoami(session)
    assert second["serial"] == first["serial"]
    assert second_run.urls == [] and refusals(log) == []
    assert server.counts() == before
    assert any(f.note == "using a stored token for this server" for f in log.frames)


async def test_no_secret_appears_in_any_frame(server: ProtectedServer) -> None:
    """Access and refresh tokens, the client secret, codes and verifiers, searched for by value."""
    clock = Clock()
    authorizer = TestAuthorizer()
    config = {"client_id": "test-client", "client_secret": server.client_secret}
    session, log = session_for(server.url, authorizer=authorizer, now=clock, **config)
    async with session:
        await whoami(session)
        await session.call_tool("admin_report", {})  # step-up: a second code, verifier and token
        clock.offset = 3600
        await whoami(session)  # a refresh
        await session.call_tool("revoke_my_token", {})
        await whoami(session)  # 401, and another refresh
    secrets = server.state()["secrets"]
    mine = [s for s in secrets if s in authorizer.codes()]
    assert len(mine) == 2 and server.client_secret in secrets
    assert len(secrets) > 10
    assert leaked(log.frames, secrets) == []
    assert leaked([Frame("http", "out", f"Bearer {secrets[-1]}".encode())], secrets)  # the search finds one
    # The token request authenticated with Basic (masked), not with the secret in the body.
    [token, *_] = exchanges(log, "token")
    assert token.transport["http"]["headers"]["Authorization"].startswith("Basic ••••")


# --- misbehaving servers: a verdict on each MUST ----------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        ("resource-mismatch", "oauth-resource-mismatch"),
        ("no-pkce", "oauth-no-pkce"),
        ("issuer-mismatch", "oauth-issuer-mismatch"),
        ("no-authorization-endpoint", "oauth-as-metadata"),  # refused at once, not a request timeout
    ],
)
async def test_a_broken_must_is_an_error_verdict_and_no_authorization(mode: str, code: str) -> None:
    with oauth_sdk_server("--break", mode) as broken:
        authorizer = TestAuthorizer()
        session, log = session_for(broken.url, authorizer=authorizer)
        with pytest.raises(Exception, match="HTTP 401"):
            async with session:
                pass
        assert broken.counts()["authorizations"] == 0
    assert authorizer.urls == []
    assert (code, "error") in [(v.code, v.severity) for f in log.frames for v in f.verdicts]
    assert any(v.code == "oauth-failed" for f in log.frames for v in f.verdicts)


async def test_a_plain_http_authorization_server_on_another_host_is_refused() -> None:
    """Scripted: no non-loopback host can be served here. The flow stops before asking it anything."""
    asked: list[str] = []
    prm = {"resource": "https://mcp.example.com/mcp", "authorization_servers": ["http://auth.example.com"]}
    metadata_url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        if str(request.url) == metadata_url:
            return httpx.Response(200, json=prm)
        if request.url.host == "mcp.example.com" and request.method == "POST":
            challenge = f'Bearer resource_metadata="{metadata_url}"'
            return httpx.Response(
                401, headers={"WWW-Authenticate": challenge}, json={"error": "invalid_token"}
            )
        return httpx.Response(200, json={"issuer": "http://auth.example.com"})

    target = HttpTarget(
        "https://mcp.example.com/mcp", transport="http", oauth=OAuthConfig(authorizer=TestAuthorizer())
    )
    session = ClientSession(StreamableHttpTransport(target, client_factory=mock_http(handler)))
    log = EventLog(session)
    with pytest.raises(Exception, match="HTTP 401"):
        async with session:
            pass
    assert [u for u in asked if "auth.example.com" in u] == []
    insecure = [v for f in log.frames for v in f.verdicts if v.code == "oauth-insecure"]
    assert insecure and insecure[0].severity == "error" and "http://auth.example.com" in insecure[0].message


# --- the TypeScript SDK's example server --------------------------------------------------------------------


async def test_the_typescript_sdk_example_server_with_oauth() -> None:
    with ts_example_server() as url:
        authorizer = TestAuthorizer()
        session, log = session_for(url, authorizer=authorizer)
        async with session:
            greeting = await session.call_tool("greet", {"name": "Ada"})
    assert "Ada" in greeting["content"][0]["text"]
    assert len(authorizer.urls) == 1
    assert authorizer.params()["resource"] == url and authorizer.params()["scope"] == "mcp:tools"
    assert oauth_steps(log)[-1] == "token"
    assert errors(log) == []
    assert not {v.code for f in log.frames for v in f.verdicts} & JSONRPC_CODES
