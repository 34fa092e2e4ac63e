"""ASGI entry point: Django for HTTP, Channels consumers for websockets."""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
# Set up Django (apps, settings) before anything imports models through the consumers.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from inspector.daphne_http import leave_bodies_to_django, receive_for  # noqa: E402
from inspector.origins import WebsocketOriginValidator  # noqa: E402
from inspector.routing import websocket_urlpatterns  # noqa: E402
from inspector.tap_route import PREFIX as TAP_PREFIX  # noqa: E402
from inspector.tap_route import serve as serve_tap  # noqa: E402
from sessions.runtime.host import ensure_embedded_runtime, warm_up_in_background  # noqa: E402
from sessions.runtime.workers import ensure_reaper  # noqa: E402

# Under daphne (mcp-inspector, or `daphne inspector.asgi:application`), which imports this module.
leave_bodies_to_django()
if settings.INSPECTOR_EMBEDDED_RUNTIME:
    warm_up_in_background()

router = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Same origin only (scheme, host and port), as for pages: inspector/origins.py.
        "websocket": WebsocketOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Route the request; first make sure this process runs its session runtime, or its reaper (hosted)."""
    if scope["type"] != "lifespan":
        ensure_embedded_runtime()
        ensure_reaper()
    if scope["type"] == "http" and scope["path"].startswith(TAP_PREFIX):
        # A host's traffic to a tap endpoint: streamed, outside Django's middleware (no cookies, no CSRF).
        await serve_tap(scope, receive_for(scope, receive), send)
        return
    await router(scope, receive_for(scope, receive), send)
