"""The timeline as a message flow (a sequence diagram): a window of it, and what the live socket sends."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from sessions.models import McpSession
from sessions.timeline.flow import FlowState
from sessions.timeline.flow_window import placed, window
from sessions.timeline.queries import TimelineFilter, page_of_rows
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import int_param, owned_session

__all__ = ["VIEWS", "appended", "flow_page", "replaced"]

VIEWS = ("table", "flow")


@require_GET
async def flow_page(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """A window of the flow (newest, before a seq, or after one), filtered like the table."""
    session = await owned_session(request, public_id)
    flt = TimelineFilter.from_data(request.GET)
    before, after = int_param(request.GET, "before"), int_param(request.GET, "after")

    def rows() -> list[dict[str, Any]]:
        return window(session, page_of_rows(session, flt, before=before, after=after))[0]

    context = {"items": await sync_to_async(rows)(), "session": session}
    return await sync_to_async(render)(request, "sessions/flow/_rows.html", context)


def replaced(
    session: McpSession, rows: list[dict[str, Any]], context: dict[str, Any]
) -> tuple[str, FlowState]:
    """The timeline redrawn as a flow (the socket's "replace"); the state to feed what comes next."""
    items, state = window(session, rows)
    return render_to_string("sessions/flow/_replace.html", {**context, "items": items}), state


def appended(session: McpSession, state: FlowState, rows: list[dict[str, Any]]) -> str:
    """New rows placed after those shown (no database access)."""
    items = placed(rows, state.feed(rows))
    return render_to_string("sessions/flow/_append.html", {"items": items, "session": session})
