"""Logging in (one-time token locally, password hosted), logging out, invitations; included under /auth/."""

from __future__ import annotations

from django.urls import URLPattern, path

from inspector import views

urlpatterns: list[URLPattern] = [
    path("login", views.login_page, name="login"),
    path("token", views.token_login, name="auth-token"),
    path("logout", views.logout_view, name="logout"),
    path("invite", views.invite_page, name="invite"),
]
