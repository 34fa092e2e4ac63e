"""Single sign-on with OpenID Connect (inspector/sso.py), included under /auth/oidc/."""

from __future__ import annotations

from django.urls import URLPattern, path

from inspector import sso

urlpatterns: list[URLPattern] = [
    path("login", sso.start, name="sso-login"),
    path("callback", sso.callback, name="sso-callback"),
]
