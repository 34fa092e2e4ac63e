"""MCP Apps: the Apps tab, a tool's view opened for a call, the view's document, the view's requests.

The page is the host (``static/inspector/apps.js``); these views are what it asks of the server:

- ``open_view`` reads the tool's ``ui://`` resource with resources/read through the session (so it is on
  the timeline) and answers where its document is served, with the call's arguments and result;
- ``view_frame`` serves that document from the stored answer, under the policy its ``_meta.ui.csp``
  declares and ``sandbox allow-scripts``: an opaque origin that reaches neither our origin, cookies nor
  DOM, whoever opens it;
- ``view_messages`` records what passed between the view and the page on the timeline, as local
  frames of their own, with the verdicts the page gave them;
- ``view_request`` carries the requests the view may make (tools/call, resources/read) to the server
  through the session, refusing a tool whose ``_meta.ui.visibility`` leaves out "app".
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from sessions.engine import MAX_APP_MESSAGES, UI_MIME_TYPE, tool_view_uri, tool_visibility, view_csp
from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.timeline.apps import call_exchange, offers_views, tool_views, view_document
from sessions.timeline.listings import find_tool, stored_pages
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import BadParameter, int_param, once_stored, owned_session, parse_json

__all__ = ["offered", "open_view", "panel_context", "view_frame", "view_messages", "view_request"]

# What a view may ask the server for through the host; anything else is answered "method not found".
FORWARDED = ("tools/call", "resources/read")
METHOD_NOT_FOUND, INVALID_PARAMS = -32601, -32602
# What a view is told of its tool (hostContext.toolInfo).
TOOL_INFO = ("name", "title", "description", "inputSchema", "_meta")
VIEW_WAIT = 30.0  # seconds a view's request may take before the host tells it to look at the timeline


def offered(session: McpSession) -> bool:
    """Whether the Apps tab shows: the newest tool listing has a tool with a view."""
    return offers_views(session)


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """What the Apps panel shows: the tools with a view (runs in a worker thread)."""
    return {"apps": tool_views(stored_pages(session))}


def mount_context(session: McpSession, tool: dict[str, Any]) -> dict[str, Any] | None:
    """What a view's place under a call card needs, or None for a tool without a view."""
    uri = tool_view_uri(tool)
    if uri is None:
        return None
    return {"session": session, "tool": str(tool.get("name") or ""), "uri": uri}


def _rpc_error(code: int, message: str, refused: str = "") -> JsonResponse:
    # A refusal is the view's JSON-RPC error, not a failed HTTP request: the proxy did its job.
    return JsonResponse({"error": {"code": code, "message": message}, "refused": refused})


async def _send(
    request: AuthedRequest, session: McpSession, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """A request through the session's owner; its outcome (result or error, where its frames sit)."""
    user = await signed_in_user(request)
    try:
        answer = await client.request(session, m.Request(method, params, wait=VIEW_WAIT, user_id=user.pk))
    except client.CommandFailed as exc:
        return {"error": {"code": None, "message": str(exc)}}
    if not isinstance(answer, m.Done):
        return {"rpc_id": answer.rpc_id, "error": {"code": None, "message": f"{method} is still running"}}
    return answer.outcome


@require_POST
async def open_view(request: AuthedRequest, public_id: Any) -> JsonResponse:
    """Read a tool's view (resources/read through the session) and say where its document is served,
    with the arguments and the outcome of the call ``rpc_id`` when given."""
    session = await owned_session(request, public_id)
    name = request.POST.get("name", "")
    try:
        rpc_id = int_param(request.POST, "rpc_id")
    except BadParameter as exc:
        return JsonResponse({"message": str(exc)}, status=400)
    tool = await sync_to_async(find_tool)(session, name)
    uri = tool_view_uri(tool)
    if tool is None or uri is None:
        return JsonResponse({"message": f"no tool {name!r} with a view in the newest listing"}, status=404)
    outcome = await _send(request, session, "resources/read", {"uri": uri})
    if "error" in outcome:
        return JsonResponse(
            {"message": f"resources/read {uri} failed: {outcome['error'].get('message')}"}, status=502
        )
    seq = int(outcome.get("response_seq") or 0)
    view = await sync_to_async(view_document)(session, seq)
    if view is None:
        return JsonResponse({"message": f"resources/read {uri} answered no HTML document"}, status=409)
    call = None
    if rpc_id is not None:
        call = await once_stored(session, lambda: call_exchange(session, rpc_id))
    return JsonResponse(
        {
            "tool": {
                k: tool.get(k) for k in ("name", "title", "description", "inputSchema", "_meta") if k in tool
            },
            "uri": uri,
            "frame": reverse("app_frame", args=[session.public_id, seq]),
            "source": reverse("frame", args=[session.public_id, seq]),
            "read_rpc_id": outcome.get("rpc_id"),
            "mime_type": view.mime_type,
            "mime_ok": view.mime_type == UI_MIME_TYPE,
            "ui": view.ui,
            "csp": view_csp(view.ui),
            "call": call,
        }
    )


@require_GET
async def view_frame(request: AuthedRequest, public_id: Any, seq: int) -> HttpResponse:
    """A view's document, from the stored resources/read answer (frame ``seq``), sandboxed by its CSP;
    with ``?offline=1`` (a recorded view of an ended session), with no network at all."""
    session = await owned_session(request, public_id)
    view = await sync_to_async(view_document)(session, seq)
    if view is None:
        raise Http404("No view document in that frame")
    response = HttpResponse(view.html, content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = view_csp(view.ui, offline=request.GET.get("offline") == "1")
    response["Referrer-Policy"] = "no-referrer"
    response["X-Content-Type-Options"] = "nosniff"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    return response


def _visible_to_app(session: McpSession, name: str) -> tuple[str, str]:
    """Why the view may not call tool ``name`` (the verdict and the message), or two empty strings."""
    tool = find_tool(session, name)
    if tool is None:
        return "apps-unknown-tool", f"no tool {name!r} in the newest listing"
    if "app" not in tool_visibility(tool):
        return (
            "apps-tool-not-visible",
            f'tool {name!r} is not visible to apps (_meta.ui.visibility leaves out "app")',
        )
    return "", ""


@require_POST
async def view_request(request: AuthedRequest, public_id: Any) -> JsonResponse:
    """A request a view made, carried to the server through the session: ``{"method", "params"}`` in,
    the JSON-RPC ``result`` or ``error`` out (with ``rpc_id``, the request's id on the timeline)."""
    session = await owned_session(request, public_id)
    try:
        body = await _json_body(request)
    except ValueError as exc:
        return JsonResponse({"message": f"the body is not JSON: {exc}"}, status=400)
    if not isinstance(body, dict) or not isinstance(body.get("params", {}), dict):
        return JsonResponse({"message": "the body is an object with a method and object params"}, status=400)
    method, params = body.get("method"), body.get("params") or {}
    if method not in FORWARDED:
        return _rpc_error(METHOD_NOT_FOUND, f"the host does not forward {str(method)[:100]!r} to the server")
    if method == "tools/call":
        name = params.get("name")
        if not isinstance(name, str):
            return _rpc_error(INVALID_PARAMS, "tools/call needs a tool name")
        verdict, why = await sync_to_async(_visible_to_app)(session, name)
        if verdict:
            return _rpc_error(INVALID_PARAMS, why, verdict)
    elif not isinstance(params.get("uri"), str):
        return _rpc_error(INVALID_PARAMS, "resources/read needs a uri")
    meta = params.get("_meta")
    if isinstance(meta, dict) and "progressToken" in meta:
        # The session numbers its own progress tokens; the view's would cross them.
        params = {**params, "_meta": {k: v for k, v in meta.items() if k != "progressToken"}}
    outcome = await _send(request, session, method, params)
    answer: dict[str, Any] = {"rpc_id": outcome.get("rpc_id")}
    if "error" in outcome:
        error = outcome["error"]
        answer["error"] = {"code": error.get("code") or -32603, "message": str(error.get("message") or "")}
        if error.get("data") is not None:
            answer["error"]["data"] = error["data"]
    else:
        answer["result"] = outcome.get("result")
    return JsonResponse(answer)


async def _json_body(request: AuthedRequest) -> Any:
    """The request's JSON body; ``ValueError`` says why there is none."""
    if request.content_type != "application/json":
        raise ValueError("send the request as application/json")
    try:
        return parse_json(request.body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"the body is not UTF-8: {exc}") from None


@require_POST
async def view_messages(request: AuthedRequest, public_id: Any) -> JsonResponse:
    """A batch of view↔host messages, recorded as frames of their own: ``{"view", "messages", "dropped"}``."""
    session = await owned_session(request, public_id)
    try:
        body = await _json_body(request)
    except ValueError as exc:
        return JsonResponse({"message": str(exc)}, status=400)
    messages = body.get("messages") if isinstance(body, dict) else None
    view = body.get("view") if isinstance(body, dict) else None
    dropped = body.get("dropped", 0) if isinstance(body, dict) else 0
    if not isinstance(messages, list) or not isinstance(view, str) or not isinstance(dropped, int):
        return JsonResponse(
            {"message": "the body is {view: a URI, messages: a list, dropped: a number}"}, status=400
        )
    if len(messages) > MAX_APP_MESSAGES:
        return JsonResponse({"message": f"at most {MAX_APP_MESSAGES} messages a batch"}, status=400)
    try:
        await client.call(session, m.AppMessages(view, messages, max(0, dropped)), timeout=10.0)
    except (client.CommandFailed, client.NoAnswer) as exc:
        return JsonResponse({"message": f"not recorded: {exc}"}, status=409)
    return JsonResponse({"recorded": len(messages)})
