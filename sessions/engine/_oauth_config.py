"""What a person (or a config file) tells the engine about authorizing to a server; cheap to import."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["GRANTS", "Authorizer", "Grant", "OAuthConfig", "OAuthFailed", "TokenStore"]

Grant = Literal["authorization_code", "client_credentials", "jwt_bearer", "token_exchange"]
GRANTS: tuple[Grant, ...] = ("authorization_code", "client_credentials", "jwt_bearer", "token_exchange")


class OAuthFailed(Exception):
    """The authorization flow stopped: the reason is said in words (and as frames on the timeline)."""


class Authorizer(Protocol):
    """Takes a person (or a test server that approves by itself) through the authorization step."""

    application_type: str
    """``native`` (a loopback redirect, the CLI) or ``web`` (the inspector's own callback)."""

    async def redirect_uri(self) -> str:
        """The redirect URI to register and send; start listening for it if that is needed."""
        ...

    async def authorize(self, url: str, state: str) -> str:
        """Open ``url`` and return the URL the authorization server redirected back to."""
        ...


class TokenStore(Protocol):
    """Where a server's tokens and client registrations are kept between runs (encrypted by the app)."""

    def load(self, key: str) -> dict[str, Any] | None: ...

    def save(self, key: str, data: dict[str, Any]) -> None: ...


@dataclass(slots=True)
class OAuthConfig:
    """How to authorize. Everything is optional: with nothing set, the flow discovers what it needs,
    registers itself (a client ID metadata document or dynamic registration) and asks for the
    scopes the server names."""

    client_id: str | None = None
    client_secret: str | None = None
    client_metadata_url: str | None = None
    """A Client ID Metadata Document URL, used as the client id where the server supports it."""
    scope: str | None = None
    """Scopes to ask for instead of the ones the server names."""
    client_name: str = "MCP Inspector"
    grant: Grant = "authorization_code"
    private_key_pem: str | None = None
    """A private key for ``private_key_jwt`` client authentication (RFC 7523)."""
    signing_algorithm: str = "RS256"
    assertion: str | None = None
    """A JWT for the jwt-bearer grant (workload identity federation, SEP-1933)."""
    idp_token_endpoint: str | None = None
    """Enterprise-managed authorization (SEP-990): the identity provider's token endpoint..."""
    idp_id_token: str | None = None
    """...the ID token to exchange there for an identity assertion grant..."""
    idp_client_id: str | None = None
    """...and the client id the identity provider knows this client by."""
    offline_access: bool = True
    """Ask for ``offline_access`` (a refresh token) where the server lists it."""
    dpop: bool = True
    """Bind tokens with DPoP (RFC 9449) where the server supports it."""
    max_authorizations: int = 3
    """Authorization attempts for one request before giving up (a server that never grants enough)."""
    authorizer: Authorizer | None = None
    store: TokenStore | None = None
    store_key: str | None = None
    now: Callable[[], float] = time.time
    """The wall clock token expiry is reckoned on (a test's, to expire a token without waiting)."""
