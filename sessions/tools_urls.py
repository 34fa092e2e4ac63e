"""URLs of the tools features of a session (included under s/<uuid:public_id>/)."""

from __future__ import annotations

from django.urls import path

from sessions import tools_views

urlpatterns = [
    path("tools/list", tools_views.list_tools, name="tools_list"),
    path("tools/form", tools_views.tool_form, name="tool_form"),
    path("tools/call", tools_views.call_tool, name="tool_call"),
]
