"""The timeline: its pages, one frame opened, and the session's exports (JSON Lines, HTML, collection)."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Role
from sessions.timeline.apps import recorded_view
from sessions.timeline.exports import collection, document, jsonl_lines
from sessions.timeline.queries import TimelineFilter, frame_detail, page_of_rows
from sessions.timeline.redaction import Redactor
from sessions.web import playground, together
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import int_param, once_stored, owned_session

__all__ = ["attachment", "export", "export_collection", "export_html", "frame", "frame_raw", "timeline_page"]


@require_GET
async def timeline_page(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """A page of timeline rows (newest, before a seq, or after one), filtered."""
    session = await owned_session(request, public_id)
    flt = TimelineFilter.from_data(request.GET)
    before, after = int_param(request.GET, "before"), int_param(request.GET, "after")
    rows = await sync_to_async(page_of_rows)(session, flt, before=before, after=after)
    context = {"rows": rows, "session": session}
    return await sync_to_async(render)(request, "sessions/_timeline_rows.html", context)


@require_GET
async def frame(request: AuthedRequest, public_id: Any, seq: int) -> HttpResponse:
    """One frame opened: raw bytes, pretty JSON, verdicts, transport details."""
    session = await owned_session(request, public_id)
    detail = await once_stored(session, lambda: frame_detail(session, seq))
    if detail is None:
        raise Http404("No such frame")
    user = await signed_in_user(request)
    notes = await sync_to_async(together.frame_context)(session, seq, user.pk)
    chat_call = await sync_to_async(playground.call_of_frame)(session, seq)
    frames = TimelineFrame.objects.filter(session=session)
    app_view = await sync_to_async(recorded_view)(session, detail["frame"], frames)
    if app_view and app_view.get("read_seq"):
        # An ended session's view is drawn from the recording, with no network (as a share draws it).
        app_view["frame_url"] = (
            reverse("app_frame", args=[session.public_id, app_view["read_seq"]]) + "?offline=1"
        )
    context = {"session": session, **detail, **notes, "chat_call": chat_call, "app_view": app_view}
    return await sync_to_async(render)(request, "sessions/_frame_detail.html", context)


async def _exported(request: AuthedRequest, public_id: Any) -> tuple[McpSession, Redactor | None, str]:
    """The session to export and how: redacted by default (the built-in rules and the session's own
    secrets); ``?redacted=0`` for the recording as it is, for operators and admins only."""
    if request.GET.get("redacted", "1") == "0":
        return await owned_session(request, public_id, Role.OPERATOR), None, "-unredacted"
    session = await owned_session(request, public_id)
    return session, Redactor.for_session(session.config), ""


@require_GET
async def frame_raw(request: AuthedRequest, public_id: Any, seq: int) -> HttpResponse:
    """One frame's bytes, whole, as a download (a call card shows only the head of a big answer)."""
    session = await owned_session(request, public_id)
    row = await once_stored(session, TimelineFrame.objects.filter(session=session, seq=seq).only("raw").first)
    if row is None:
        raise Http404("No such frame")
    response = HttpResponse(bytes(row.raw), content_type="application/octet-stream")
    return attachment(response, f"mcp-session-{session.public_id}-frame-{seq}.json")


@require_GET
async def export(request: AuthedRequest, public_id: Any) -> StreamingHttpResponse:
    """Download the whole timeline as JSON Lines, one frame a line (raw bytes as text)."""
    session, redactor, suffix = await _exported(request, public_id)
    response = StreamingHttpResponse(jsonl_lines(session, redactor), content_type="application/x-ndjson")
    return attachment(response, f"mcp-session-{session.public_id}{suffix}.jsonl")


@require_GET
async def export_collection(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The session's requests as a collection for ``mcp-inspector --cli --collection`` (CI regressions)."""
    session, redactor, suffix = await _exported(request, public_id)
    steps = await sync_to_async(collection)(session, redactor)
    response = HttpResponse(
        json.dumps(steps, indent=2, ensure_ascii=False) + "\n", content_type="application/json"
    )
    return attachment(response, f"mcp-collection-{session.public_id}{suffix}.json")


@require_GET
async def export_html(request: AuthedRequest, public_id: Any) -> StreamingHttpResponse:
    """Download the session as one self-contained HTML file (no script, nothing loaded from outside)."""
    session, redactor, suffix = await _exported(request, public_id)
    response = StreamingHttpResponse(document(session, redactor), content_type="text/html; charset=utf-8")
    return attachment(response, f"mcp-session-{session.public_id}{suffix}.html")


_Response = TypeVar("_Response", HttpResponse, StreamingHttpResponse)


def attachment(response: _Response, filename: str) -> _Response:
    """A download: the browser saves the response as ``filename`` instead of showing it."""
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
