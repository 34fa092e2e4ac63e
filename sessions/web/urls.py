"""Pages and fragments of MCP sessions, by feature."""

from __future__ import annotations

from django.urls import include, path

from sessions.web import (
    calls,
    compare,
    completion,
    logs,
    panels,
    prompts,
    resources,
    reviews,
    roots,
    search,
    sessions,
    timeline,
    tools,
)

session_urls = [
    path("", sessions.session_page, name="session"),
    path("delete", sessions.delete_session, name="delete_session"),
    path("import", sessions.import_status, name="import_status"),
    path("disconnect", sessions.disconnect, name="disconnect"),
    path("reconnect", sessions.reconnect, name="reconnect"),
    path("reinitialize", sessions.reinitialize, name="reinitialize"),
    path("panel/<str:name>", panels.panel, name="panel"),
    path("request", calls.send_request, name="request"),
    path("calls/<int:rpc_id>", calls.call_card, name="call"),
    path("calls/<int:rpc_id>/cancel", calls.cancel, name="cancel"),
    path("timeline", timeline.timeline_page, name="timeline"),
    path("frames/<int:seq>", timeline.frame, name="frame"),
    path("export", timeline.export, name="export"),
    path("export.html", timeline.export_html, name="export_html"),
    path("collection.json", timeline.export_collection, name="export_collection"),
    path("tools/list", tools.list_tools, name="tools_list"),
    path("tools/form", tools.tool_form, name="tool_form"),
    path("tools/call", tools.call_tool, name="tool_call"),
    path("list/<str:kind>", panels.list_items, name="list_items"),
    path("resources/read-template", resources.read_template, name="read_template"),
    path("resources/subscribe", resources.subscribe, name="subscribe"),
    path("calls/<int:rpc_id>/contents/<int:index>", resources.resource_blob, name="resource_blob"),
    path("prompts/get", prompts.get_prompt, name="get_prompt"),
    path("complete", completion.complete, name="complete"),
    path("logging/level", logs.set_level, name="set_level"),
    path("ping", logs.ping, name="ping"),
    path("reviews/<int:pk>/answer", reviews.review_answer, name="review_answer"),
    path("reviews/<int:pk>/reject", reviews.review_reject, name="review_reject"),
    path("reviews/<int:pk>/sampling", reviews.sampling_answer, name="review_sampling"),
    path("reviews/<int:pk>/draft", reviews.sampling_draft, name="review_draft"),
    path("reviews/<int:pk>/elicitation", reviews.elicitation_answer, name="review_elicitation"),
    path("reviews/<int:pk>/consent", reviews.elicitation_consent, name="review_consent"),
    path("reviews/<int:pk>/roots", reviews.roots_answer, name="review_roots"),
    path("roots", roots.roots_save, name="roots_save"),
]

urlpatterns = [
    path("", sessions.home, name="home"),
    path("connect", sessions.connect, name="connect"),
    path("servers/import", sessions.import_servers, name="import_servers"),
    path("servers/<int:pk>/connect", sessions.connect_saved, name="connect_saved"),
    path("servers/<int:pk>/delete", sessions.delete_server, name="delete_server"),
    path("sessions/delete-ended", sessions.delete_ended_sessions, name="delete_ended_sessions"),
    path("recordings/open", sessions.open_recording, name="open_recording"),
    path("search", search.search, name="search"),
    path("compare", compare.compare, name="compare"),
    path("s/<uuid:public_id>/", include(session_urls)),
]
