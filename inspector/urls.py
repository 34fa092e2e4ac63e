"""Root URL configuration: project pages here, sessions (the product) in sessions.urls."""

from __future__ import annotations

from django.urls import include, path

from inspector import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("auth/", include("inspector.auth_urls")),
    path("", include("sessions.web.urls")),
]
