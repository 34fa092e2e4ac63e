"""URLs of the resources, prompts and logging features of a session (included under s/<uuid:public_id>/)."""

from __future__ import annotations

from django.urls import URLPattern, path

from sessions import resources_views

urlpatterns: list[URLPattern] = [
    path("list/<str:kind>", resources_views.list_items, name="list_items"),
    path("resources/read-template", resources_views.read_template, name="read_template"),
    path("resources/subscribe", resources_views.subscribe, name="subscribe"),
    path("calls/<int:rpc_id>/contents/<int:index>", resources_views.resource_blob, name="resource_blob"),
    path("prompts/get", resources_views.get_prompt, name="get_prompt"),
    path("complete", resources_views.complete, name="complete"),
    path("logging/level", resources_views.set_level, name="set_level"),
    path("ping", resources_views.ping, name="ping"),
]
