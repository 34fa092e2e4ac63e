"""Websocket URL routes."""

from __future__ import annotations

from django.urls import path

from inspector.consumers import HealthConsumer
from sessions.web.consumers import SessionConsumer
from sessions.web.shared_live import SharedConsumer

websocket_urlpatterns = [
    path("ws/health/", HealthConsumer.as_asgi()),
    path("ws/sessions/<uuid:public_id>/", SessionConsumer.as_asgi()),
    path("ws/shared/<str:token>/", SharedConsumer.as_asgi()),
]
