"""Pages and fragments of MCP sessions."""

from __future__ import annotations

from django.urls import include, path

from sessions import views

urlpatterns = [
    path("", views.home, name="home"),
    path("connect", views.connect, name="connect"),
    path("servers/import", views.import_servers, name="import_servers"),
    path("servers/<int:pk>/connect", views.connect_saved, name="connect_saved"),
    path("servers/<int:pk>/delete", views.delete_server, name="delete_server"),
    path("s/<uuid:public_id>/delete", views.delete_session, name="delete_session"),
    path("sessions/delete-ended", views.delete_ended_sessions, name="delete_ended_sessions"),
    path("s/<uuid:public_id>/", views.session_page, name="session"),
    path("s/<uuid:public_id>/panel/<str:name>", views.panel, name="panel"),
    path("s/<uuid:public_id>/request", views.send_request, name="request"),
    path("s/<uuid:public_id>/calls/<int:rpc_id>", views.call_card, name="call"),
    path("s/<uuid:public_id>/calls/<int:rpc_id>/cancel", views.cancel, name="cancel"),
    path("s/<uuid:public_id>/disconnect", views.disconnect, name="disconnect"),
    path("s/<uuid:public_id>/reconnect", views.reconnect, name="reconnect"),
    path("s/<uuid:public_id>/reinitialize", views.reinitialize, name="reinitialize"),
    path("s/<uuid:public_id>/timeline", views.timeline_page, name="timeline"),
    path("s/<uuid:public_id>/frames/<int:seq>", views.frame, name="frame"),
    path("s/<uuid:public_id>/export", views.export, name="export"),
    path("s/<uuid:public_id>/export.html", views.export_html, name="export_html"),
    path("s/<uuid:public_id>/collection.json", views.export_collection, name="export_collection"),
    path("recordings/open", views.open_recording, name="open_recording"),
    path("search", views.search, name="search"),
    path("compare", views.compare, name="compare"),
    path("s/<uuid:public_id>/", include("sessions.tools_urls")),
    path("s/<uuid:public_id>/", include("sessions.resources_urls")),
    path("s/<uuid:public_id>/", include("sessions.reviews_urls")),
]
