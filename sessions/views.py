"""Views of MCP sessions: thin; they read the database and send commands to the runtime."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.http import Http404, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from inspector.http import AuthedRequest, signed_in_user
from sessions import commands, workers
from sessions.calls import call_context, recent_calls
from sessions.forms import ConnectForm, ImportForm
from sessions.models import McpSession, PendingReview, ServerConfig, TimelineFrame
from sessions.timeline import TimelineFilter, frame_detail, page_of_rows

PANELS = ("overview", "tools", "resources", "prompts", "logging", "roots", "conformance")


async def owned_session(request: AuthedRequest, public_id: Any) -> McpSession:
    """Return the session if it belongs to the signed-in user, else 404 (never 403: ids stay private)."""
    user = await signed_in_user(request)
    session = await McpSession.objects.filter(public_id=public_id, owner_id=user.pk).afirst()
    if session is None:
        raise Http404("No such session")
    return session


@require_GET
def home(request: AuthedRequest) -> HttpResponse:
    """List the person's sessions and saved servers, with the connect form."""
    if workers.reap_due():
        async_to_sync(workers.tell_viewers)(workers.reap())
    return _home(request)


def _home(request: AuthedRequest, status: int = 200, **extra: Any) -> HttpResponse:
    """The home page: the person's sessions and saved servers, the connect form, and ``extra``."""
    context = {
        "sessions": McpSession.objects.filter(owner=request.user)[:50],
        "servers": ServerConfig.objects.filter(owner=request.user),
        "form": ConnectForm(),
        **extra,
    }
    return render(request, "home.html", context, status=status)


@require_POST
async def connect(request: AuthedRequest) -> HttpResponse:
    """Start a session from the connect form (and save the server when asked)."""
    form = ConnectForm(request.POST)
    if not await sync_to_async(form.is_valid)():
        user = await signed_in_user(request)
        context = {"form": form, "servers": [s async for s in ServerConfig.objects.filter(owner_id=user.pk)]}
        return await sync_to_async(render)(request, "sessions/_connect_form.html", context, status=422)
    user = await signed_in_user(request)
    config = form.snapshot()
    server = await sync_to_async(form.save_server)(user) if form.cleaned_data.get("save") else None
    session = await McpSession.objects.acreate(
        owner_id=user.pk, server=server, name=config["name"], config=config, roots=form.cleaned_data["roots"]
    )
    await commands.start_session(session)
    url = f"/s/{session.public_id}/"
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


@require_POST
async def connect_saved(request: AuthedRequest, pk: int) -> HttpResponse:
    """Start a session from a saved server."""
    user = await signed_in_user(request)
    server = await ServerConfig.objects.filter(pk=pk, owner_id=user.pk).afirst()
    if server is None:
        raise Http404("No such server")
    session = await McpSession.objects.acreate(
        owner_id=user.pk, server=server, name=server.name, config=server.snapshot()
    )
    await commands.start_session(session)
    return redirect(f"/s/{session.public_id}/")


@require_GET
async def session_page(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The session: lifecycle, feature panels, calls, reviews and the live timeline."""
    if workers.reap_due():  # hosted only, at most once a heartbeat: no database work otherwise
        await workers.tell_viewers(await sync_to_async(workers.reap)())
    session = await owned_session(request, public_id)
    tab = request.GET.get("tab", "overview")
    if tab not in PANELS:
        tab = "overview"
    context = await sync_to_async(_session_context)(session, tab, request)
    return await sync_to_async(render)(request, "sessions/session.html", context)


def _session_context(session: McpSession, tab: str, request: AuthedRequest) -> dict[str, Any]:
    rows = page_of_rows(session, TimelineFilter())
    wanted = request.GET.get("frame", "")
    return {
        "opened": frame_detail(session, int(wanted)) if wanted.isdigit() else None,
        "session": session,
        "tab": tab,
        "panels": PANELS,
        "panel": panel_context(session, tab, request),
        "calls": recent_calls(session),
        "reviews": list(PendingReview.objects.filter(session=session, status=PendingReview.Status.WAITING)),
        "rows": rows,
        "first_shown": rows[0]["seq"] if rows else 0,
        "last_shown": rows[-1]["seq"] if rows else 0,
        "filter": TimelineFilter(),
    }


def panel_context(session: McpSession, tab: str, request: AuthedRequest) -> dict[str, Any]:
    """Return what a feature panel shows; each feature module adds its own part."""
    from sessions import report, resources_views, reviews_views, tools_views

    feature = {
        "tools": tools_views,
        "resources": resources_views,
        "prompts": resources_views,
        "logging": resources_views,
        "roots": reviews_views,
        "conformance": report,
    }.get(tab)
    context: dict[str, Any] = {"session": session, "tab": tab, "q": request.GET.get("q", "")}
    if feature is not None:
        context.update(feature.panel_context(session, tab, request))
    return context


@require_GET
async def panel(request: AuthedRequest, public_id: Any, name: str) -> HttpResponse:
    """One feature panel, for tab switches."""
    session = await owned_session(request, public_id)
    if name not in PANELS:
        raise Http404("No such panel")
    context = await sync_to_async(panel_context)(session, name, request)
    html = await sync_to_async(render_to_string)(f"sessions/panels/{name}.html", context, request)
    tabs = render_to_string(
        "sessions/_tabs.html", {"session": session, "tab": name, "panels": PANELS, "oob": True}
    )
    return HttpResponse(html + tabs)


async def render_call(
    request: AuthedRequest, session: McpSession, method: str, params: dict[str, Any] | None, **fields: Any
) -> HttpResponse:
    """Send a request through the owner and render its call card (finished, or running with progress)."""
    try:
        # A quick answer comes back in this response; a slow one shows its running card at once
        # and finishes over the live socket.
        answer = await commands.request(session, method, params, wait=0.5, stored=False, **fields)
    except commands.CommandFailed as exc:
        return HttpResponse(render_to_string("sessions/_error.html", {"message": str(exc)}), status=409)
    outcome = answer if answer.get("event") == "done" else None
    sent = {"method": method, "params": params or {}}
    context = await sync_to_async(call_context)(session, answer["rpc_id"], outcome=outcome, sent=sent)
    if outcome is None:
        context["running"] = True
    return await sync_to_async(render)(request, "sessions/_call.html", context)


@require_POST
async def send_request(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Send any request: a method and its params as JSON (the raw editor, and every panel's buttons)."""
    session = await owned_session(request, public_id)
    method = request.POST.get("method", "").strip()
    if not method:
        return HttpResponseBadRequest("method is required")
    try:
        params = json.loads(request.POST.get("params") or "null")
    except ValueError as exc:
        return HttpResponse(
            render_to_string("sessions/_error.html", {"message": f"params are not JSON: {exc}"}), status=422
        )
    if params is not None and not isinstance(params, dict):
        return HttpResponse(
            render_to_string("sessions/_error.html", {"message": "params must be a JSON object"}), status=422
        )
    timeout = request.POST.get("timeout")
    fields = {"timeout": float(timeout)} if timeout else {}
    return await render_call(request, session, method, params, **fields)


@require_GET
async def call_card(request: AuthedRequest, public_id: Any, rpc_id: int) -> HttpResponse:
    """A call card as the timeline has it now (the pending card polls this once, closing a race)."""
    session = await owned_session(request, public_id)
    context = await sync_to_async(call_context)(session, rpc_id)
    return await sync_to_async(render)(request, "sessions/_call.html", context)


@require_POST
async def cancel(request: AuthedRequest, public_id: Any, rpc_id: int) -> HttpResponse:
    """Cancel a running request: the server gets notifications/cancelled."""
    session = await owned_session(request, public_id)
    try:
        await commands.call(
            session,
            "cancel",
            rpc_id=rpc_id,
            reason=request.POST.get("reason") or "cancelled in the inspector",
        )
    except commands.CommandFailed as exc:
        return HttpResponse(render_to_string("sessions/_error.html", {"message": str(exc)}), status=409)
    context = await sync_to_async(call_context)(session, rpc_id)
    if context["running"]:
        context["outcome"] = {"error": {"code": None, "message": "cancelled"}}
        context["running"] = False
    return await sync_to_async(render)(request, "sessions/_call.html", context)


@require_POST
async def disconnect(request: AuthedRequest, public_id: Any) -> HttpResponse:
    session = await owned_session(request, public_id)
    if session.is_live:
        with contextlib.suppress(commands.CommandFailed):
            await commands.call(session, "disconnect")
    return _back_to(request, session)


@require_POST
async def reconnect(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Start the same recorded session again; the timeline continues where it stopped."""
    session = await owned_session(request, public_id)
    if session.is_imported:
        return HttpResponseBadRequest("a session opened from a recording has no server to reconnect to")
    if not session.is_live or not session.worker_channel:
        session.status = McpSession.Status.STARTING
        await session.asave(update_fields=["status"])
        await commands.start_session(session)
    return _back_to(request, session)


@require_POST
async def reinitialize(request: AuthedRequest, public_id: Any) -> HttpResponse:
    session = await owned_session(request, public_id)
    try:
        await commands.call(session, "reinitialize", timeout=30)
    except commands.CommandFailed as exc:
        return HttpResponse(render_to_string("sessions/_error.html", {"message": str(exc)}), status=409)
    return _back_to(request, session)


def _back_to(request: AuthedRequest, session: McpSession) -> HttpResponse:
    """After a lifecycle action: htmx needs nothing (the live socket shows it); a plain form goes back."""
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(f"/s/{session.public_id}/")


@require_GET
async def timeline_page(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """A page of timeline rows (newest, before a seq, or after one), filtered."""
    session = await owned_session(request, public_id)
    flt = TimelineFilter.from_data(request.GET)

    def number(name: str) -> int | None:
        value = request.GET.get(name, "")
        return int(value) if value.isdigit() else None

    rows = await sync_to_async(page_of_rows)(session, flt, before=number("before"), after=number("after"))
    return await sync_to_async(render)(
        request, "sessions/_timeline_rows.html", {"rows": rows, "session": session}
    )


@require_GET
async def frame(request: AuthedRequest, public_id: Any, seq: int) -> HttpResponse:
    """One frame opened: raw bytes, pretty JSON, verdicts, transport details."""
    session = await owned_session(request, public_id)
    detail = await sync_to_async(frame_detail)(session, seq)
    if detail is None:
        raise Http404("No such frame")
    return await sync_to_async(render)(request, "sessions/_frame_detail.html", {"session": session, **detail})


@require_GET
async def export(request: AuthedRequest, public_id: Any) -> StreamingHttpResponse:
    """Download the whole timeline as JSON Lines, one frame a line (raw bytes as text)."""
    session = await owned_session(request, public_id)

    def record(row: TimelineFrame) -> str:
        raw = bytes(row.raw)
        try:
            text, encoding = raw.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = raw.decode("latin-1"), "latin-1"
        fields = {
            "seq": row.seq, "kind": row.kind, "direction": row.direction, "wall": row.wall, "mono": row.mono,
            "method": row.method or None, "rpc_id": json.loads(row.rpc_id) if row.rpc_id else None,
            "rpc_kind": row.rpc_kind or None, "pair_seq": row.pair_seq, "latency_ms": row.latency_ms,
            "size": row.size, "raw": text, "raw_encoding": encoding, "transport": row.transport,
            "verdicts": row.verdicts, "note": row.note or None, "parse_error": row.parse_error or None,
        }  # fmt: skip
        return json.dumps(fields, ensure_ascii=False) + "\n"

    async def lines() -> AsyncIterator[str]:
        after = 0
        while True:
            rows = [
                r
                async for r in TimelineFrame.objects.filter(session=session, seq__gt=after).order_by("seq")[
                    :500
                ]
            ]
            if not rows:
                return
            for row in rows:
                yield record(row)
            after = rows[-1].seq

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="mcp-session-{session.public_id}.jsonl"'
    return response


@require_GET
async def export_collection(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The session's requests as a collection for ``mcp-inspector --cli --collection`` (CI regressions)."""
    from sessions.collections import collection

    session = await owned_session(request, public_id)
    document = await sync_to_async(collection)(session)
    response = HttpResponse(
        json.dumps(document, indent=2, ensure_ascii=False) + "\n", content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="mcp-collection-{session.public_id}.json"'
    return response


@require_GET
async def export_html(request: AuthedRequest, public_id: Any) -> StreamingHttpResponse:
    """Download the session as one self-contained HTML file (no script, nothing loaded from outside)."""
    from sessions.export_html import document

    session = await owned_session(request, public_id)
    response = StreamingHttpResponse(document(session), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="mcp-session-{session.public_id}.html"'
    return response


@require_GET
def compare(request: AuthedRequest) -> HttpResponse:
    """Compare what two of the person's sessions offer (see sessions/compare.py)."""
    from sessions import compare as comparing

    context: dict[str, Any] = {"choices": comparing.sessions_of(request.user), "a": None, "b": None}
    wanted = [request.GET.get("a", ""), request.GET.get("b", "")]
    context["preselect"] = next((w for w in wanted if w), "")  # "Compare with…" from a session page
    if all(wanted):
        try:
            a, b = (McpSession.objects.get(owner=request.user, public_id=uuid.UUID(w)) for w in wanted)
        except (ValueError, McpSession.DoesNotExist):
            context["problem"] = "choose two of your sessions"
        else:
            context.update(comparing.compare(a, b))
    return render(request, "compare.html", context, status=422 if "problem" in context else 200)


@require_GET
def search(request: AuthedRequest) -> HttpResponse:
    """Search the frames of every session the person owns (see sessions/search.py for the syntax)."""
    from sessions.search import results

    return render(request, "search.html", results(request.user, request.GET.get("q", "")))


@require_POST
def open_recording(request: AuthedRequest) -> HttpResponse:
    """Open a JSON Lines recording (the web export or the CLI's --record) as a closed session."""
    from sessions.recordings import MAX_BYTES, RecordingError, import_recording

    upload = request.FILES.get("recording")
    problem = "choose a .jsonl file to open" if upload is None else ""
    if upload is not None and upload.size is not None and upload.size > MAX_BYTES:
        problem = f"{upload.name} is larger than {MAX_BYTES >> 20} MiB"
    elif upload is not None:
        try:
            session = import_recording(request.user, upload.name or "recording", upload)
        except (RecordingError, UnicodeDecodeError) as exc:
            problem = f"cannot open {upload.name}: {exc}"
        else:
            return redirect("session", public_id=session.public_id)
    return _home(request, status=422, recording_error=problem)


@require_POST
def import_servers(request: AuthedRequest) -> HttpResponse:
    """Save the servers of a pasted mcpServers document."""
    form = ImportForm(request.POST)
    if form.is_valid():
        form.save(request.user)
        return redirect("home")
    return _home(request, status=422, import_form=form)


@require_POST
def delete_session(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Delete an ended session with its timeline; a live one must be disconnected first."""
    session = McpSession.objects.filter(public_id=public_id, owner=request.user).first()
    if session is None:
        raise Http404("No such session")
    if session.is_live:
        return HttpResponse("Disconnect the session before deleting it.", status=409)
    session.delete()
    return _home_again(request)


def _home_again(request: AuthedRequest) -> HttpResponse:
    return HttpResponseClientRedirect("/") if request.htmx else redirect("home")


@require_POST
def delete_ended_sessions(request: AuthedRequest) -> HttpResponse:
    """Clear the history: every ended session of the person (live ones stay), with their timelines."""
    McpSession.objects.filter(owner=request.user).exclude(status__in=McpSession.LIVE).delete()
    return _home_again(request)


@require_POST
def delete_server(request: AuthedRequest, pk: int) -> HttpResponse:
    ServerConfig.objects.filter(pk=pk, owner=request.user).delete()
    return redirect("home")
