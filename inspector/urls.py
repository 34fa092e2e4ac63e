"""Root URL configuration: project pages here, sessions (the product) in sessions.urls."""

from __future__ import annotations

from django.urls import include, path

from inspector import views

# A view's BadRequest (a parameter it cannot take) is answered 400 with the reason.
handler400 = views.bad_request
# A 404 says which thing was not found when a view said so.
handler404 = views.not_found
# A refusal (PermissionDenied: a role too low, no team) is answered 403 with its reason.
handler403 = views.forbidden

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    # Before auth/: the flow's cookie is scoped to this path (inspector.sso.FLOW_PATH).
    path("auth/oidc/", include("inspector.sso_urls")),
    path("auth/", include("inspector.auth_urls")),
    path("", include("sessions.web.urls")),
]
