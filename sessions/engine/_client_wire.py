"""The client rules that read one message or one HTTP request on its own: headers, ``_meta`` keys, schema.

``_client_rules`` keeps the conversation's books and calls these with what they need; nothing here
keeps state. Every code is prefixed ``client-`` (see ``_client_rules.side_of``).
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ._frames import Frame, Severity, Verdict
from ._protocol import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

__all__ = [
    "STATELESS_VERSION",
    "check_http",
    "check_meta",
    "http_request",
    "schema_verdicts",
    "since",
]

STATELESS_VERSION = "2026-07-28"
JSON, SSE = "application/json", "text/event-stream"
# Requests of the stateless revision whose HTTP POST must carry Mcp-Name (their params.name or uri).
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def since(version: str | None, revision: str) -> bool:
    """Whether ``version`` (a revision date, or unknown) is ``revision`` or later; unknown is not."""
    return version is not None and version >= revision


def http_request(frame: Frame) -> tuple[str, dict[str, str]] | None:
    """The HTTP method and request headers (lower-cased names) a client frame was sent with, when known."""
    details = frame.transport.get("http") if isinstance(frame.transport, dict) else None
    if not isinstance(details, dict) or not isinstance(details.get("headers"), dict):
        return None
    headers = {str(k).lower(): str(v) for k, v in details["headers"].items()}
    method = details.get("method")
    return (method.upper() if isinstance(method, str) else "POST"), headers


# Query parameters that carry a credential (RFC 6750 names access_token; the rest are its cousins).
_TOKEN_PARAMS = frozenset({"access_token", "token", "id_token", "refresh_token", "api_key", "apikey"})


def _check_url(frame: Frame) -> None:
    """A token goes in the Authorization header, never in the URL's query."""
    url = frame.transport["http"].get("url")
    if not isinstance(url, str) or "?" not in url:
        return
    names = {name.lower() for name, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}
    if names & _TOKEN_PARAMS:
        frame.flag(
            "client-token-in-url",
            "error",
            f"a credential in the URL's query ({', '.join(sorted(names & _TOKEN_PARAMS))}): "
            "tokens go in the Authorization header",
        )


def _media_types(accept: str) -> set[str]:
    return {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}


def check_http(
    frame: Frame,
    *,
    version: str | None,
    initializing: bool,
    session_id: str | None,
    message: Any,
) -> None:
    """Streamable HTTP: Accept, MCP-Protocol-Version, Mcp-Session-Id (and the stateless revision's
    Mcp-Method and Mcp-Name) on one request of the client, when its headers were recorded.

    ``version``: the negotiated revision (``None`` until the initialize result); ``initializing``:
    the request is the initialize POST itself, which carries neither the version nor a session id.
    """
    request = http_request(frame)
    if request is None:
        return
    method, headers = request
    _check_url(frame)
    accept = _media_types(headers.get("accept", ""))
    if method == "POST" and not {JSON, SSE} <= accept:
        frame.flag(
            "client-accept-header",
            "error",
            f"a POST must send Accept listing both {JSON} and {SSE} "
            f"(sent: {headers.get('accept', 'none')!r})",
        )
    elif method == "GET" and SSE not in accept:
        frame.flag(
            "client-accept-header",
            "error",
            f"a GET must send Accept listing {SSE} (sent: {headers.get('accept', 'none')!r})",
        )
    meta_version = _meta_version(message)
    if version == STATELESS_VERSION or (version is None and meta_version is not None):
        _check_stateless_headers(frame, headers, meta_version, message)
        return
    if initializing:
        return
    sent_version = headers.get("mcp-protocol-version")
    if since(version, "2025-06-18"):
        if sent_version is None:
            frame.flag(
                "client-protocol-version-header",
                "error",
                "an HTTP request after initialization must carry MCP-Protocol-Version "
                f"(negotiated: {version})",
            )
        elif sent_version != version:
            frame.flag(
                "client-protocol-version-header",
                "warning",
                f"MCP-Protocol-Version {sent_version!r} is not the negotiated version {version}",
            )
    if session_id is not None and method in ("POST", "GET", "DELETE"):
        sent_id = headers.get("mcp-session-id")
        if sent_id is None:
            frame.flag(
                "client-session-id-header",
                "error",
                "the server gave an Mcp-Session-Id: every later HTTP request must carry it",
            )
        elif sent_id != session_id and "•" not in sent_id:  # a masked value cannot be compared
            frame.flag(
                "client-session-id-header",
                "error",
                f"Mcp-Session-Id {sent_id!r} is not the one the server gave ({session_id!r})",
            )


def _meta_version(message: Any) -> str | None:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _check_stateless_headers(
    frame: Frame, headers: dict[str, str], meta_version: str | None, message: Any
) -> None:
    """Stateless POSTs: MCP-Protocol-Version equal to the ``_meta`` one, Mcp-Method, and Mcp-Name."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return
    method = message["method"]
    sent_version = headers.get("mcp-protocol-version")
    if meta_version is not None and sent_version != meta_version:
        frame.flag(
            "client-protocol-version-header",
            "error",
            f"MCP-Protocol-Version ({sent_version or 'missing'}) must equal the _meta version {meta_version}",
        )
    if headers.get("mcp-method") != method:
        frame.flag(
            "client-method-header",
            "error",
            f"a stateless POST must carry Mcp-Method: {method} (sent: {headers.get('mcp-method', 'none')!r})",
        )
    key = NAMED_METHODS.get(method)
    params = message.get("params")
    name = params.get(key) if key and isinstance(params, dict) else None
    if isinstance(name, str) and headers.get("mcp-name") is None:
        frame.flag("client-method-header", "error", f"a stateless {method} must carry Mcp-Name: {name}")


# _meta key names: an optional prefix of dot-separated labels and a slash, then a name.
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_NAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")
_PREFIX = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
# Keys the specification itself defines under a reserved prefix (a client may send them).
SPEC_META_KEYS = frozenset(
    {
        "io.modelcontextprotocol/related-task",
        "io.modelcontextprotocol/model-immediate-response",
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/logLevel",
        "io.modelcontextprotocol/subscriptionId",
    }
)


def reserved(prefix: str, version: str) -> bool:
    """Whether a ``_meta`` prefix (without its slash) is reserved for MCP in ``version``.

    2025-06-18: ``modelcontextprotocol`` or ``mcp`` as any label but the last (``mcp.dev/``);
    2025-11-25 on (reverse DNS): as the second label (``io.modelcontextprotocol/``, ``dev.mcp/``).
    """
    labels = prefix.lower().split(".")
    if since(version, "2025-11-25"):
        return len(labels) >= 2 and labels[1] in ("modelcontextprotocol", "mcp")
    return any(label in ("modelcontextprotocol", "mcp") for label in labels[:-1])


def check_meta(container: Any, frame: Frame, at: str, version: str | None) -> Any:
    """The ``_meta`` rules for a params or result object; return its ``_meta`` (when an object).

    Key names are held to the format from 2025-06-18 (earlier revisions set none); a reserved
    prefix is MCP's, so a key under one the specification does not define is misuse.
    """
    if not isinstance(container, dict) or "_meta" not in container:
        return None
    meta = container["_meta"]
    if not isinstance(meta, dict):
        frame.flag("client-meta", "error", f"{at}_meta must be an object")
        return None
    if not since(version, "2025-06-18"):
        return meta
    assert version is not None
    for key in meta:
        prefix, slash, name = key.rpartition("/")
        if (slash and not _PREFIX.fullmatch(prefix)) or not _NAME.fullmatch(name):
            frame.flag("client-meta", "error", f"{at}_meta key {key!r} is not a valid key name")
        elif slash and reserved(prefix, version) and key not in SPEC_META_KEYS:
            frame.flag(
                "client-meta",
                "error",
                f"{at}_meta key {key!r} uses the prefix {prefix + '/'!r}, which is reserved for MCP",
            )
    return meta


def schema_verdicts(kind: str, method: str, version: str, payload: Any) -> list[Verdict]:
    """Hold a client request, notification or result (``kind``) to ``version``'s schema (mcp-types)."""
    checks = _mcp_types()
    if checks is None or version not in checks.KNOWN_PROTOCOL_VERSIONS:
        return []
    import pydantic

    try:
        if kind == "request":
            checks.validate_client_request(method, version, payload)
        elif kind == "notification":
            checks.validate_client_notification(method, version, payload)
        else:
            checks.validate_client_result(method, version, payload)
    except KeyError:
        return _published_verdicts(kind, method, version, payload)
    except pydantic.ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        return [Verdict("client-schema", "error", f"{method} {kind} does not match {version}: {where}")]
    return []


def _published_verdicts(kind: str, method: str, version: str, payload: Any) -> list[Verdict]:
    """What mcp-types has no model for (the tasks of 2025-11-25), held to the published schema."""
    from . import _published

    if kind == "result":
        definition = _published.result_definition(version, method)
        value = payload
    else:
        definition = _published.request_definition(version, method)
        value = {"jsonrpc": "2.0", "method": method} | ({"id": 0} if kind == "request" else {})
        if payload is not None:
            value["params"] = payload
    if definition is None:
        if kind == "result":
            return []  # a method the revision lacks was the server's to send
        severity: Severity = "warning"
        return [Verdict("client-not-in-revision", severity, f"{kind} {method!r} is not in {version}")]
    return [
        Verdict("client-schema", v.severity, v.message)
        for v in _published.check(version, definition, value, kind)
    ]


@functools.cache
def _mcp_types() -> Any:
    """``mcp_types.methods``, imported on first use (about 0.35 s)."""
    try:
        from mcp_types import methods
    except ImportError:  # pragma: no cover - a dependency of the project, but the engine stands alone
        return None
    return methods
