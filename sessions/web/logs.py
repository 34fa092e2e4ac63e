"""The Logging panel: the server's log level, its log lines filtered by level, and ping."""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, HttpResponseBadRequest
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from sessions.frames import params_of
from sessions.models import McpSession, TimelineFrame, wall_time
from sessions.servers import LOG_LEVELS, level_rank
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import capabilities, feature, owned_session, render_panel

__all__ = ["log_line", "log_lines", "panel_context", "ping", "set_level"]

LOG_LINES = 200

LOG_SCAN = 2000


def log_line(params: dict[str, Any], wall: float, seq: int) -> dict[str, Any]:
    """Return what a log line shows, from the params of a notifications/message."""
    level = params.get("level")
    data = params.get("data")
    return {
        "seq": seq,
        "time": wall_time(wall),
        "level": level if isinstance(level, str) else "?",
        "rank": level_rank(level),
        "logger": params.get("logger") if isinstance(params.get("logger"), str) else "",
        "text": data if isinstance(data, str) else None,
        "data": data,
    }


def log_lines(session: McpSession, min_level: str, limit: int = LOG_LINES) -> list[dict[str, Any]]:
    """Return the newest log notifications at or above ``min_level``, oldest first."""
    floor = level_rank(min_level)
    frames = TimelineFrame.objects.filter(
        session=session, method="notifications/message", direction="in"
    ).order_by("-seq")[:LOG_SCAN]
    lines: list[dict[str, Any]] = []
    for frame in frames:
        line = log_line(params_of(frame.raw), frame.wall, frame.seq)
        if line["rank"] >= floor:
            lines.append(line)
            if len(lines) >= limit:
                break
    return lines[::-1]


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """What the logging panel shows (runs in a worker thread)."""
    min_level = request.GET.get("min_level", "debug")
    if min_level not in LOG_LEVELS:
        min_level = "debug"
    answered = (
        TimelineFrame.objects.filter(
            session=session, method="logging/setLevel", direction="in", rpc_kind="result"
        )
        .order_by("-seq")
        .values_list("pair_seq", flat=True)
        .first()
    )
    sent = TimelineFrame.objects.filter(session=session, seq=answered).first() if answered else None
    return {
        "caps": capabilities(session),
        "levels": LOG_LEVELS,
        "min_level": min_level,
        "min_rank": level_rank(min_level),
        "server_level": fresh.get("level") or (params_of(sent.raw).get("level") if sent else None),
        "log_lines": log_lines(session, min_level),
        "log_limit": LOG_LINES,
    }


@require_POST
async def set_level(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Ask the server to send log messages at this level and above."""
    session = await owned_session(request, public_id)
    level = request.POST.get("level", "")
    if level not in LOG_LEVELS:
        return HttpResponseBadRequest("level must be an RFC 5424 level")
    problem = await feature(request, session, "set_level", level)
    context = await sync_to_async(panel_context)(session, request, {} if problem else {"level": level})
    failed = f"setting the level failed: {problem}" if problem else None
    return await render_panel(request, session, "logging", context, list_error=failed)


@require_POST
async def ping(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Ping the server and show the round trip."""
    session = await owned_session(request, public_id)
    started = time.monotonic()
    problem = await feature(request, session, "ping")
    answer = {"event": "done", **({"error": {"message": problem}} if problem else {})}
    # Measured here: through the owner and back, so a little more than the wire's round trip.
    context = {"answer": answer, "latency_ms": (time.monotonic() - started) * 1000}
    return HttpResponse(render_to_string("sessions/resources/_pong.html", context))
