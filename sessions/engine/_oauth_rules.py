"""OAuth's MCP-specific rules as pure functions: challenges, discovery URLs, resource and issuer
checks, scope selection, and the authorization response. No I/O here; ``_oauth.py`` runs the flow.

The rules follow the protocol's authorization section (2025-06-18 on), RFC 9728 (protected
resource metadata), RFC 8414 (authorization server metadata), RFC 8707 (resource indicators),
RFC 9207 (the ``iss`` authorization response parameter) and the 2025-03-26 fallbacks.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit, urlunsplit

from ._frames import Severity

__all__ = [
    "Challenge",
    "Problem",
    "as_metadata_urls",
    "authorization_response",
    "canonical_resource",
    "check_as_metadata",
    "check_prm",
    "is_secure_url",
    "legacy_endpoints",
    "mask_form",
    "mask_json_secrets",
    "origin_of",
    "describe_challenge",
    "judge_unauthenticated",
    "parse_challenges",
    "pick_challenge",
    "prm_urls",
    "resource_covers",
    "select_scopes",
]

SECRET_FIELDS = frozenset(
    {
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "code",
        "code_verifier",
        "assertion",
        "client_assertion",
        "subject_token",
        "registration_access_token",
    }
)


@dataclass(slots=True, frozen=True)
class Problem:
    """A finding about a step of the flow: a verdict code, its severity, and why."""

    code: str
    severity: Severity
    message: str
    fatal: bool = False
    """The flow must stop here (a MUST the client has to refuse on)."""


@dataclass(slots=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge: its scheme and parameters (names lower-cased)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> str | None:
        value = self.params.get("scope")
        return value if value and value.strip() else None

    @property
    def error(self) -> str | None:
        return self.params.get("error")


_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf"\s*({_TOKEN})\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|({_TOKEN}|[^\s,]*))\s*(?:,|$)")
_SCHEME = re.compile(rf"\s*({_TOKEN})(?=\s|,|$)\s*")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*\s*(?:,|$)")  # Basic's or Negotiate's credentials


def parse_challenges(values: list[str]) -> list[Challenge]:
    """Every challenge in the ``WWW-Authenticate`` header values (RFC 9110 §11.6.1), tolerant of junk."""
    found: list[Challenge] = []
    for value in values:
        rest = value.strip()
        while rest:
            rest = rest.lstrip(", ")
            match = _SCHEME.match(rest)
            if match is None:
                break
            challenge = Challenge(match.group(1))
            rest = rest[match.end() :]
            token68 = _TOKEN68.match(rest)
            if token68 is not None:
                rest = rest[token68.end() :]
            while rest and token68 is None:
                param = _PARAM.match(rest)
                if param is None:
                    break
                name, quoted, plain = param.group(1), param.group(2), param.group(3)
                text = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else (plain or "")
                challenge.params[name.lower()] = text
                rest = rest[param.end() :]
            found.append(challenge)
            rest = rest.lstrip(", ")
            if rest and _PARAM.match(rest) is None and _SCHEME.match(rest) is None:
                break
    return found


def pick_challenge(challenges: list[Challenge]) -> Challenge | None:
    """The challenge that speaks to OAuth: one naming its metadata or an error, else the first."""
    for challenge in challenges:
        if challenge.resource_metadata or challenge.error:
            return challenge
    return challenges[0] if challenges else None


def describe_challenge(status: int, challenge: Challenge | None) -> str:
    """A refusal in a line: its status and challenge."""
    if challenge is None:
        return f"HTTP {status} with no WWW-Authenticate challenge"
    params = ", ".join(f"{k}={v}" for k, v in challenge.params.items())
    return f"HTTP {status}: {challenge.scheme} {params}".rstrip()


def judge_unauthenticated(status: int, challenge: Challenge | None) -> tuple[str, list[Problem]]:
    """What a request without a token drew: a note, and what is wrong with it (RFC 9728 §5.1)."""
    if status != 401:
        note = f"the server answered {status} without a token: it may not need one"
        return note, [Problem("oauth-challenge", "info", note)]
    if challenge is None:
        message = "a 401 MUST carry a WWW-Authenticate challenge (RFC 6750 §3, RFC 9728 §5.1)"
        return "401 with no WWW-Authenticate challenge", [Problem("oauth-challenge", "error", message)]
    note = describe_challenge(status, challenge).replace(f"HTTP {status}", str(status), 1)
    if challenge.resource_metadata is None:
        message = (
            "the challenge names no resource_metadata: the client falls back to the well-known "
            "locations (RFC 9728 §5.1)"
        )
        return note, [Problem("oauth-challenge", "warning", message)]
    return note, []


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, as written (no trailing slash)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def canonical_resource(url: str) -> str:
    """The server's canonical URI (RFC 8707, the protocol's "canonical server URI"): lower-case
    scheme and host, no fragment, no query, no trailing slash unless it is the whole path."""
    parts = urlsplit(url)
    path = parts.path
    if path.endswith("/") and path != "/":
        path = path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path if path != "/" else "", "", ""))


def prm_urls(server_url: str) -> list[str]:
    """Protected resource metadata locations, in the order RFC 9728 §3.1 and the spec give:
    path-aware first, then the root."""
    parts = urlsplit(server_url)
    base = origin_of(server_url)
    path = parts.path.rstrip("/")
    urls = [f"{base}/.well-known/oauth-protected-resource{path}"] if path else []
    urls.append(f"{base}/.well-known/oauth-protected-resource")
    return urls


def as_metadata_urls(issuer: str) -> list[str]:
    """Authorization server metadata locations for an issuer, in the protocol's order: RFC 8414
    path insertion, OpenID Connect with path insertion, then OpenID Connect path appending."""
    parts = urlsplit(issuer)
    base = origin_of(issuer)
    path = parts.path.rstrip("/")
    if not path:
        return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]


def legacy_endpoints(server_url: str) -> dict[str, Any]:
    """The 2025-03-26 fallback when a server publishes no metadata: the default endpoints at the
    server's origin (the authorization base URL)."""
    base = origin_of(server_url)
    return {
        "issuer": base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "registration_endpoint": f"{base}/register",
        "code_challenge_methods_supported": ["S256"],
    }


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_secure_url(url: str) -> bool:
    """HTTPS, or plain HTTP to a loopback address (development servers, as OAuth 2.1 allows)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and _is_loopback(parts.hostname or "")


def _origin_key(parts: SplitResult) -> tuple[str, str, int | None]:
    """Scheme, host and port, the default port spelled out (``https://h:443`` is ``https://h``)."""
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"https": 443, "http": 80}.get(scheme)


def resource_covers(published: str, server_url: str) -> bool:
    """Whether the resource a server's metadata publishes names this server: the same origin, and
    the server's path at or under the published path (RFC 9728 §3.3; a parent resource may cover
    several endpoints)."""
    given, server = urlsplit(published), urlsplit(server_url)
    if _origin_key(given) != _origin_key(server):
        return False
    prefix = given.path.rstrip("/")
    path = server.path.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


def check_prm(document: Any, server_url: str, fetched_from: str) -> list[Problem]:
    """What is wrong with a protected resource metadata document for this server."""
    if not isinstance(document, dict):
        return [Problem("oauth-prm", "error", "protected resource metadata is not a JSON object", fatal=True)]
    problems: list[Problem] = []
    resource = document.get("resource")
    if not isinstance(resource, str) or not resource:
        problems.append(Problem("oauth-prm", "error", "protected resource metadata has no `resource`", True))
    elif not resource_covers(resource, server_url):
        problems.append(
            Problem(
                "oauth-resource-mismatch",
                "error",
                f"the metadata's resource {resource!r} does not name this server ({server_url}); "
                "a client MUST NOT authorize for it",
                fatal=True,
            )
        )
    servers = document.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not all(isinstance(s, str) and s for s in servers):
        problems.append(
            Problem(
                "oauth-prm",
                "error",
                "protected resource metadata lists no `authorization_servers`",
                fatal=True,
            )
        )
    scopes = document.get("scopes_supported")
    if scopes is not None and not (isinstance(scopes, list) and all(isinstance(s, str) for s in scopes)):
        problems.append(Problem("oauth-prm", "warning", "`scopes_supported` is not a list of strings"))
    if not is_secure_url(fetched_from):
        problems.append(
            Problem("oauth-insecure", "error", f"metadata fetched over plain HTTP: {fetched_from}")
        )
    return problems


def check_as_metadata(document: Any, issuer: str, *, legacy: bool = False) -> list[Problem]:
    """What is wrong with authorization server metadata fetched for ``issuer``."""
    if not isinstance(document, dict):
        return [
            Problem("oauth-as-metadata", "error", "authorization server metadata is not a JSON object", True)
        ]
    problems: list[Problem] = []
    given = document.get("issuer")
    if given != issuer and legacy:
        # 2025-03-26 built the metadata URL from the server, not from an issuer: worth saying only.
        problems.append(
            Problem("oauth-issuer-mismatch", "warning", f"the metadata's issuer {given!r} is not {issuer!r}")
        )
    elif given != issuer:
        # RFC 8414 §3.3: identical, compared as strings; using it anyway lets metadata be poisoned.
        problems.append(
            Problem(
                "oauth-issuer-mismatch",
                "error",
                f"the metadata's issuer {given!r} is not {issuer!r}, the issuer its URL was built from; "
                "its endpoints MUST NOT be used",
                fatal=True,
            )
        )
    for key in ("authorization_endpoint", "token_endpoint"):
        value = document.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(Problem("oauth-as-metadata", "error", f"`{key}` is not a URL", True))
        elif isinstance(value, str) and not is_secure_url(value):
            problems.append(Problem("oauth-insecure", "error", f"`{key}` is not HTTPS: {value}", fatal=True))
    if not isinstance(document.get("token_endpoint"), str):
        problems.append(Problem("oauth-as-metadata", "error", "the metadata names no `token_endpoint`", True))
    methods = document.get("code_challenge_methods_supported")
    if not legacy and "authorization_code" in grant_types(document):
        if methods is None:
            problems.append(
                Problem(
                    "oauth-no-pkce",
                    "error",
                    "the metadata has no `code_challenge_methods_supported`: the client MUST refuse to "
                    "proceed without PKCE support",
                    fatal=True,
                )
            )
        elif not isinstance(methods, list) or "S256" not in methods:
            problems.append(
                Problem(
                    "oauth-no-pkce", "error", f"the server does not support PKCE S256 ({methods!r})", True
                )
            )
    return problems


def grant_types(document: dict[str, Any]) -> list[str]:
    """The grant types an authorization server supports (RFC 8414's default when it says none)."""
    value = document.get("grant_types_supported")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return ["authorization_code", "implicit"]


def auth_methods(document: dict[str, Any]) -> list[str]:
    """Token endpoint authentication methods the server supports (RFC 8414's default)."""
    value = document.get("token_endpoint_auth_methods_supported")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return ["client_secret_basic"]


def select_scopes(
    *,
    configured: str | None,
    challenged: str | None,
    published: list[str] | None,
    server_scopes: list[str] | None,
    previous: str | None = None,
    offline: bool = True,
) -> str | None:
    """The scope to ask for (the protocol's scope selection strategy): what the person configured;
    else the challenge's ``scope``; else every scope the resource publishes; else none. A step-up
    asks for the union with what was asked before. ``offline_access`` is added when the
    authorization server lists it and a refresh token is wanted (SEP-2207), never otherwise."""
    if configured:
        words = configured.split()
    elif challenged:
        words = challenged.split()
    elif published:
        words = list(published)
    else:
        words = []
    if previous and (challenged or configured):
        words = [*previous.split(), *words]
    if words and offline and server_scopes and "offline_access" in server_scopes:
        words.append("offline_access")
    unique = list(dict.fromkeys(w for w in words if w))
    return " ".join(unique) or None


def authorization_response(
    url: str, *, state: str, issuer: str, iss_supported: bool
) -> tuple[dict[str, str], list[Problem]]:
    """Read the redirect the authorization server sent the browser to: its parameters and what is
    wrong with them (a wrong ``state``; ``iss`` compared as a plain string, RFC 9207)."""
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    params = {name: values[0] for name, values in query.items() if values}
    problems: list[Problem] = []
    if params.get("state") != state:
        problems.append(
            Problem("oauth-state", "error", "the authorization response's `state` is not the one sent", True)
        )
    if "error" in params:
        text = params.get("error_description") or params["error"]
        problems.append(Problem("oauth-denied", "error", f"authorization refused: {text}", True))
    iss = params.get("iss")
    if iss is not None and iss != issuer:
        problems.append(
            Problem(
                "oauth-iss",
                "error",
                f"the authorization response's `iss` {iss!r} is not the issuer {issuer!r} (RFC 9207): "
                "a mix-up attack is possible; the code MUST NOT be used",
                fatal=True,
            )
        )
    elif iss is None and iss_supported:
        problems.append(
            Problem(
                "oauth-iss",
                "error",
                "the server advertises `authorization_response_iss_parameter_supported` but its "
                "response has no `iss`; the code MUST NOT be used",
                fatal=True,
            )
        )
    if "code" not in params and not problems:
        problems.append(Problem("oauth-denied", "error", "the authorization response has no `code`", True))
    return params, problems


def _mask(value: Any) -> str:
    text = str(value)
    return f"•••• ({len(text)} chars)"


def mask_json_secrets(document: Any) -> Any:
    """A JSON document with token and secret values masked, fit to record."""
    if isinstance(document, dict):
        return {
            key: _mask(value) if key in SECRET_FIELDS and value is not None else mask_json_secrets(value)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [mask_json_secrets(item) for item in document]
    return document


def mask_form(fields: dict[str, str]) -> dict[str, str]:
    """Form fields with secrets masked."""
    return {key: _mask(value) if key in SECRET_FIELDS else value for key, value in fields.items()}
