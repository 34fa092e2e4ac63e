"""App configuration for the Playground: chats with a model over a session's tools."""

from __future__ import annotations

from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "sessions.playground"
    label = "playground"
    verbose_name = "Playground"
    default_auto_field = "django.db.models.BigAutoField"
