"""A protected MCP server built on the Python SDK's authorization support, and a tiny authorization
server of ours, in one process: the engine's OAuth tests and the CLI's run against it.

Usage:
    python tests/servers/oauth_sdk_server.py --port N --auth-port M [--expires-in S] [--break MODE]

The resource server (``MCPServer`` with ``auth=AuthSettings(...)`` and a token verifier) serves
Streamable HTTP at ``http://127.0.0.1:N/mcp`` and its protected resource metadata (RFC 9728); it
needs the scope ``mcp:tools``. The authorization server at ``http://127.0.0.1:M`` is the SDK's own
routes (``create_auth_routes``: RFC 8414 metadata, dynamic registration, PKCE S256, refresh) over an
in-memory provider that approves every authorization at once (no person). It also knows one
pre-registered client, ``test-client``, whose secret is ``$OAUTH_CLIENT_SECRET`` (Basic auth).

Tools: ``whoami`` (the token's serial number and scopes, never the token itself), ``admin_report``
(needs ``mcp:admin`` too: without it the request is answered 403 ``insufficient_scope``, to step
up), ``never_enough`` (always 403 ``insufficient_scope`` asking for ``mcp:admin``, even when the
token has it), ``revoke_my_token`` (the access token stops working; its refresh token still works).

``GET http://127.0.0.1:M/debug/state``: counters (authorizations, tokens by grant) and every
secret the server issued or received (tokens, codes, verifiers, the client secret), so a test can
look for them in what the client recorded.

``--break``: a server that breaks one of the protocol's MUSTs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import time
import warnings
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

MODES = ("resource-mismatch", "no-pkce", "issuer-mismatch", "no-authorization-endpoint")
SCOPES = ["mcp:tools", "mcp:admin", "offline_access"]
REDIRECT = "http://127.0.0.1/callback"
PRE_REGISTERED = "test-client"


class Provider:
    """An in-memory authorization server that approves every request at once."""

    def __init__(self, expires_in: int, client_secret: str | None) -> None:
        self.expires_in = expires_in
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.serials: dict[str, int] = {}
        self.counts = {"authorizations": 0, "authorization_code": 0, "refresh_token": 0, "registrations": 0}
        self.seen: list[str] = []  # every secret issued or received, for tests to look for
        if client_secret:
            self.seen.append(client_secret)
            self.clients[PRE_REGISTERED] = OAuthClientInformationFull(
                client_id=PRE_REGISTERED,
                client_secret=client_secret,
                redirect_uris=[AnyUrl(REDIRECT)],
                token_endpoint_auth_method="client_secret_basic",
                grant_types=["authorization_code", "refresh_token"],
                scope=" ".join(SCOPES),
            )

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.counts["registrations"] += 1
        if client_info.client_secret:
            self.seen.append(client_info.client_secret)
        self.clients[client_info.client_id or ""] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.counts["authorizations"] += 1
        code = secrets.token_urlsafe(32)
        self.seen.append(code)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.seen += [access, refresh]
        self.serials[access] = len(self.serials) + 1
        expires = int(time.time()) + self.expires_in
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.expires_in,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.counts["authorization_code"] += 1
        del self.codes[authorization_code.code]
        return self._issue(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.counts["refresh_token"] += 1
        del self.refresh[refresh_token.token]  # rotated
        return self._issue(refresh_token.client_id, scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


async def _body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that hands it on again."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay


def _rewrite_json(app: ASGIApp, path: str, change: Any) -> ASGIApp:
    """Answer GET ``path`` with the app's JSON document as ``change`` edits it (a broken server)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != path:
            await app(scope, receive, send)
            return
        parts: list[Message] = []

        async def keep(message: Message) -> None:
            parts.append(message)

        await app(scope, receive, keep)
        start = parts[0]
        document = json.loads(b"".join(p.get("body", b"") for p in parts[1:]))
        body = json.dumps(change(document)).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapped


class ScopeGate:
    """Per-tool scopes: a tools/call of a tool that needs more than the token has is answered 403
    ``insufficient_scope`` with the scopes it needs (the protocol's step-up), before the SDK sees it."""

    NEEDS = {"admin_report": "mcp:admin", "never_enough": "mcp:admin"}
    NEVER = frozenset({"never_enough"})  # refused whatever the token (a server that never grants enough)

    def __init__(self, app: ASGIApp, provider: Provider, metadata_url: str) -> None:
        self.app, self.provider, self.metadata_url = app, provider, metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return
        body, receive = await _body(receive)
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        call = isinstance(message, dict) and message.get("method") == "tools/call"
        params = message.get("params") if call else None
        name = str(params.get("name")) if isinstance(params, dict) else ""
        needed = self.NEEDS.get(name)
        headers = dict(scope["headers"])
        token = headers.get(b"authorization", b"").decode()[7:]
        known = await self.provider.load_access_token(token)
        if needed is None or known is None or (needed in known.scopes and name not in self.NEVER):
            await self.app(scope, receive, send)
            return
        wanted = " ".join(["mcp:tools", needed])
        challenge = (
            f'Bearer error="insufficient_scope", scope="{wanted}", '
            f'resource_metadata="{self.metadata_url}", error_description="{name} needs {needed}"'
        )
        payload = json.dumps({"error": "insufficient_scope", "error_description": f"{name} needs {needed}"})
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload.encode()})


class VerifierTap:
    """Keep every ``code_verifier`` the token endpoint receives (tests look for it in frames)."""

    def __init__(self, app: ASGIApp, provider: Provider) -> None:
        self.app, self.provider = app, provider

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/token":
            body, receive = await _body(receive)
            for value in parse_qs(body.decode(errors="replace")).get("code_verifier", []):
                self.provider.seen.append(value)
        await self.app(scope, receive, send)


def resource_server(provider: Provider, port: int, issuer: str, broken: str | None) -> ASGIApp:
    url = f"http://127.0.0.1:{port}/mcp"
    server = MCPServer(
        "oauth-sdk-test-server",
        version="1.0.0",
        log_level="WARNING",
        token_verifier=ProviderTokenVerifier(provider),  # type: ignore[arg-type]
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(url),
            required_scopes=["mcp:tools"],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def whoami() -> dict[str, Any]:
        """The access token's serial number and scopes."""
        token = get_access_token()
        assert token is not None
        return {"serial": provider.serials.get(token.token), "scopes": token.scopes}

    @server.tool()
    def admin_report() -> str:
        """Needs the mcp:admin scope."""
        return "admin report: all well"

    @server.tool()
    def never_enough() -> str:
        """Needs a scope no token ever has."""
        return "unreachable"

    @server.tool()
    async def revoke_my_token() -> str:
        """The access token this request carried stops working."""
        token = get_access_token()
        assert token is not None
        provider.access.pop(token.token, None)
        return "revoked"

    metadata_path = "/.well-known/oauth-protected-resource/mcp"
    app: ASGIApp = server.streamable_http_app(json_response=True, host="127.0.0.1")
    app = ScopeGate(app, provider, f"http://127.0.0.1:{port}{metadata_path}")
    if broken == "resource-mismatch":
        app = _rewrite_json(app, metadata_path, lambda d: {**d, "resource": f"http://127.0.0.1:{port}/other"})
    return app


def authorization_server(provider: Provider, issuer: str, broken: str | None) -> ASGIApp:
    async def state(request: Request) -> JSONResponse:
        return JSONResponse({"counts": provider.counts, "secrets": provider.seen})

    routes = create_auth_routes(
        provider,  # type: ignore[arg-type]
        issuer_url=AnyHttpUrl(issuer),
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES
        ),
    )
    app: ASGIApp = Starlette(routes=[*routes, Route("/debug/state", state)])
    app = VerifierTap(app, provider)
    metadata_path = "/.well-known/oauth-authorization-server"
    if broken == "no-pkce":
        app = _rewrite_json(
            app,
            metadata_path,
            lambda d: {k: v for k, v in d.items() if k != "code_challenge_methods_supported"},
        )
    elif broken == "no-authorization-endpoint":
        app = _rewrite_json(
            app, metadata_path, lambda d: {k: v for k, v in d.items() if k != "authorization_endpoint"}
        )
    elif broken == "issuer-mismatch":
        app = _rewrite_json(app, metadata_path, lambda d: {**d, "issuer": f"{issuer}/elsewhere"})
    return app


async def serve(args: argparse.Namespace) -> None:
    issuer = f"http://127.0.0.1:{args.auth_port}"
    provider = Provider(args.expires_in, os.environ.get("OAUTH_CLIENT_SECRET"))
    apps = [
        (authorization_server(provider, issuer, args.broken), args.auth_port),
        (resource_server(provider, args.port, issuer, args.broken), args.port),
    ]
    servers = []
    for app, port in apps:
        # Listening here, in this order: once the resource port answers, the authorization port does.
        sock = socket.create_server(("127.0.0.1", port))
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        servers.append((uvicorn.Server(config), sock))
    await asyncio.gather(*(server.serve(sockets=[sock]) for server, sock in servers))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--auth-port", type=int, required=True)
    parser.add_argument("--expires-in", type=int, default=3600, help="access token lifetime in seconds")
    parser.add_argument("--break", dest="broken", choices=MODES, help="break one of the protocol's MUSTs")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
