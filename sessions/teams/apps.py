"""App configuration for teams, roles and the server catalog."""

from __future__ import annotations

from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "sessions.teams"
    label = "teams"
    verbose_name = "Teams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_logged_out

        from sessions.teams.logins import forget_login, record_login

        # Every login, whichever way (password, token, invitation, single sign-on), is listed on the
        # person's account page until it ends.
        user_logged_in.connect(record_login, dispatch_uid="teams.record_login")
        user_logged_out.connect(forget_login, dispatch_uid="teams.forget_login")
