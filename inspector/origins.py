"""Same origin only, for pages and websockets alike: an origin is a scheme, a host and a port.

The HTTP side (``middleware.SameOriginMiddleware``) and the websocket side
(``WebsocketOriginValidator``) both answer with ``is_own_origin``: the Origin header must be the
address the request itself came to (its scheme as the proxy says, when SECURE_PROXY_SSL_HEADER is
set, and its Host with the port), or one listed in CSRF_TRUSTED_ORIGINS.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

__all__ = ["WebsocketOriginValidator", "is_own_origin", "is_trusted_origin", "websocket_refusal"]

logger = logging.getLogger("inspector.security")


def is_trusted_origin(origin: str) -> bool:
    """Tell whether origin is listed in CSRF_TRUSTED_ORIGINS (exactly, or as "scheme://*.domain")."""
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parts = urlsplit(origin)
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        if "*" not in trusted:
            continue
        pattern = urlsplit(trusted)
        if pattern.scheme == parts.scheme and is_same_domain(parts.netloc, pattern.netloc.replace("*", "")):
            return True
    return False


def is_own_origin(origin: str, scheme: str, host: str) -> bool:
    """Tell whether origin is scheme://host (host with its port, as the Host header has it), or trusted."""
    return origin == f"{scheme}://{host}" or is_trusted_origin(origin)


def _header(scope: dict[str, Any], name: str) -> str | None:
    wanted = name.encode("latin-1")
    for key, value in scope.get("headers", ()):
        if key.lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


def _websocket_scheme(scope: dict[str, Any]) -> str:
    """The page's scheme for a socket: http for ws, https for wss, or what the proxy says (as
    ``HttpRequest.scheme`` reads it)."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        meta_name, secure_value = proxy
        value = _header(scope, meta_name.removeprefix("HTTP_").replace("_", "-").lower())
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") == "wss" else "http"


def websocket_refusal(scope: dict[str, Any]) -> str | None:
    """Return why a websocket handshake must be refused, or None to let it through."""
    host = _header(scope, "host")
    if not host:
        return "no Host header"
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        # Not one of our names: DNS rebinding, or a client that did not mean us.
        return "a Host not in ALLOWED_HOSTS"
    origin = _header(scope, "origin")
    if origin is None:
        # Browsers always send one on a websocket; a socket without it is not from our pages.
        return "no Origin header"
    if not is_own_origin(origin, _websocket_scheme(scope), host):
        return "cross-origin websocket"
    return None


class WebsocketOriginValidator:
    """Close a websocket handshake that another origin (another scheme, host or port) opened."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            refusal = websocket_refusal(scope)
            if refusal is not None:
                logger.warning("Forbidden websocket (%s): %s", refusal, scope.get("path", ""))
                return await WebsocketDenier.as_asgi()(scope, receive, send)
        return await self.application(scope, receive, send)
