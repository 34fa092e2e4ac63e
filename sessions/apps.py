"""App configuration for MCP sessions."""

from __future__ import annotations

from django.apps import AppConfig


class SessionsConfig(AppConfig):
    """MCP sessions; labelled apart from django.contrib.sessions, which owns "sessions"."""

    name = "sessions"
    label = "mcp_sessions"
    verbose_name = "MCP sessions"
    default_auto_field = "django.db.models.BigAutoField"
