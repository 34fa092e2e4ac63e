"""App configuration for teams, roles and the server catalog."""

from __future__ import annotations

from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "sessions.teams"
    label = "teams"
    verbose_name = "Teams"
    default_auto_field = "django.db.models.BigAutoField"
