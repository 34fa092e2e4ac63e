"""A tap session's breakpoints and faults: the "Pause on" rules, the held messages' cards, the faults.

Every action goes to the running tap over its control channel (``sessions/runtime/tap_control.py``);
what it changes reaches every open tab of the session from the tap itself (``TapChanged``, through the
session's group), so these views answer with nothing but a problem. Acting needs an operator or admin
of the session's team (``owned_session``: a POST); who decided a held message is in the Activity tab
and on its frames.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from sessions.models import McpSession
from sessions.runtime import tap_control
from sessions.timeline.search import Group, Query, Term
from sessions.web import together
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import INTEGER, BadParameter, error_response, int_param, owned_session

__all__ = ["fault_once", "faults", "release", "rule_add", "rule_remove", "tap_context", "tap_tree"]

ACTIONS = {
    "forward": "forwarded",
    "edit": "edited and forwarded",
    "drop": "dropped",
    "error": "answered with an error",
    "delay": "delayed",
}
ARROW = {"out": "host → server", "in": "server → host"}
# What the search knows only once a message has passed (its verdicts, its answer's time).
AFTER_THE_FACT = {"rule": "rule:", "latency": "latency:"}


def tap_tree(node: Term | Group) -> dict[str, Any]:
    """A search query's tree as the tap runs it (``inspector/tap/_match.py``); ``ValueError`` says
    which term a breakpoint cannot wait for."""
    if isinstance(node, Group):
        return {"op": node.op, "parts": [tap_tree(part) for part in node.parts]}
    if node.key in AFTER_THE_FACT or (node.key == "status" and node.value == "violation"):
        what = f"{node.key}:{node.value}"
        raise ValueError(f"{what} is known only after a message has passed: a breakpoint cannot wait for it")
    return {"key": node.key, "value": node.value, "quoted": node.quoted}


async def _tap_session(request: AuthedRequest, public_id: Any) -> tuple[McpSession, str]:
    session = await owned_session(request, public_id)
    run = tap_control.target_of(session) if session.is_tap else ""
    if not run:
        raise Http404("Not a tap session")
    return session, run


async def _send(run: str, message: dict[str, Any]) -> dict[str, Any] | HttpResponse:
    """The tap's answer, or the response that says why there is none."""
    try:
        return await tap_control.command(run, message)
    except tap_control.TapRefused as exc:
        return error_response(f"The tap refused: {exc}", 422)
    except tap_control.TapUnreachable as exc:
        return error_response(f"The tap cannot be reached: {exc}", 409)


def _done() -> HttpResponse:
    return HttpResponse(status=204)


# --- breakpoints ------------------------------------------------------------------------------


@require_POST
async def rule_add(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Add a "Pause on" rule: a direction, a method (prefix), a tool or resource name, a query."""
    session, run = await _tap_session(request, public_id)
    data = request.POST
    direction = data.get("direction", "")
    if direction not in ("", "in", "out"):
        return error_response("The direction is host → server, server → host, or either.", 422)
    rule: dict[str, Any] = {
        "direction": direction,
        "method": data.get("method", "").strip()[:500],
        "name": data.get("name", "").strip()[:500],
        "query": None,
    }
    text = data.get("query", "").strip()
    rule["text"] = text[:500]
    if text:
        query = Query.parse(text)
        try:
            if query.tree is None:
                raise ValueError("; ".join(query.problems))
            rule["query"] = tap_tree(query.tree)
        except ValueError as exc:
            return error_response(f"The query cannot stop a message: {exc}", 422)
    if not (direction or rule["method"] or rule["name"] or rule["query"]):
        return error_response("Say what to pause on: a direction, a method, a name or a query.", 422)
    state = await _send(run, {"op": "state"})
    if isinstance(state, HttpResponse):
        return state
    rules = [*state["state"].get("rules", []), rule]
    answer = await _send(run, {"op": "rules", "rules": rules})
    if isinstance(answer, HttpResponse):
        return answer
    user = await signed_in_user(request)
    await together.record(session, user.pk, "tap: pause on", _rule_text(rule))
    return _done()


@require_POST
async def rule_remove(request: AuthedRequest, public_id: Any, index: int) -> HttpResponse:
    """Remove one "Pause on" rule (by its place in the list the page shows)."""
    session, run = await _tap_session(request, public_id)
    state = await _send(run, {"op": "state"})
    if isinstance(state, HttpResponse):
        return state
    rules = list(state["state"].get("rules", []))
    if index >= len(rules):
        return error_response("That rule is gone already: someone else may have removed it.", 409)
    removed = rules.pop(index)
    answer = await _send(run, {"op": "rules", "rules": rules})
    if isinstance(answer, HttpResponse):
        return answer
    user = await signed_in_user(request)
    await together.record(session, user.pk, "tap: pause rule removed", _rule_text(removed))
    return _done()


def _error_code(text: str) -> int:
    """A JSON-RPC error code a person typed (-32000 when empty)."""
    text = text.strip() or "-32000"
    if not INTEGER.fullmatch(text) or not -(2**31) <= int(text) < 2**31:
        raise BadParameter("the error code is a whole number, such as -32000")
    return int(text)


def _rule_text(rule: dict[str, Any]) -> str:
    parts = [ARROW.get(rule.get("direction", ""), "")]
    parts += [f"method {rule['method']}" if rule.get("method") else "", rule.get("name") or ""]
    parts.append(f"matching {rule['text']}" if rule.get("text") else "")
    return ", ".join(p for p in parts if p)


@require_POST
async def release(request: AuthedRequest, public_id: Any, held_id: int) -> HttpResponse:
    """Decide a held message: forward it, edit and forward it, drop it, answer it with an error, delay it."""
    session, run = await _tap_session(request, public_id)
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        return error_response("Choose Forward, Edit and forward, Drop, Answer with an error or Delay.", 422)
    user = await signed_in_user(request)
    message: dict[str, Any] = {"op": "release", "id": held_id, "action": action, "by": user.get_username()}
    try:
        if action == "edit":
            message["raw"] = request.POST.get("raw", "")
        elif action == "delay":
            message["ms"] = int_param(request.POST, "ms", maximum=600_000) or 0
        elif action == "error":
            message["code"] = _error_code(request.POST.get("code", ""))
            message["message"] = request.POST.get("message", "")[:1000]
    except BadParameter as exc:
        return error_response(str(exc), 422)
    answer = await _send(run, message)
    if isinstance(answer, HttpResponse):
        return answer
    seqs = answer.get("seqs") or {}
    seq = seqs.get("sent") or seqs.get("original")
    detail = f"held message {held_id} {ACTIONS[action]}"
    detail += f" ({message['ms']} ms)" if action == "delay" else ""
    await together.record(session, user.pk, f"tap: {action}", detail, seq if isinstance(seq, int) else None)
    return _done()


# --- faults -----------------------------------------------------------------------------------


@require_POST
async def faults(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Set the standing faults: latency per direction, a share of notifications dropped, a method
    answered with an error (empty fields: none)."""
    session, run = await _tap_session(request, public_id)
    data = request.POST
    try:
        latency, drop = {}, {}
        for direction in ("out", "in"):
            ms = int_param(data, f"latency_{direction}", maximum=600_000) or 0
            jitter = int_param(data, f"jitter_{direction}", maximum=600_000) or 0
            if ms or jitter:
                latency[direction] = {"ms": ms, "jitter": jitter}
            share = int_param(data, f"drop_{direction}", maximum=100) or 0
            if share:
                drop[direction] = share / 100
        errors = []
        method = data.get("error_method", "").strip()
        if method:
            code, text = _error_code(data.get("error_code", "")), data.get("error_message", "")
            errors.append({"method": method[:200], "code": code, "message": text})
    except BadParameter as exc:
        return error_response(str(exc), 422)
    chosen = {"latency": latency, "drop": drop, "errors": errors}
    answer = await _send(run, {"op": "faults", "faults": chosen})
    if isinstance(answer, HttpResponse):
        return answer
    user = await signed_in_user(request)
    summary = _faults_text(answer["state"].get("faults") or {}) or "none"
    await together.record(session, user.pk, "tap: faults", summary)
    return _done()


@require_POST
async def fault_once(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """A one-shot fault: close the connection now, truncate or corrupt the next message one way."""
    session, run = await _tap_session(request, public_id)
    action, direction = request.POST.get("action", ""), request.POST.get("direction", "")
    if action not in ("close", "truncate", "corrupt") or (action != "close" and direction not in ARROW):
        return error_response("Choose close, or truncate or corrupt with a direction.", 422)
    answer = await _send(run, {"op": "fault", "action": action, "direction": direction})
    if isinstance(answer, HttpResponse):
        return answer
    user = await signed_in_user(request)
    what = "close the connection" if action == "close" else f"{action} the next message {ARROW[direction]}"
    await together.record(session, user.pk, "tap: fault", what)
    return _done()


def _faults_text(chosen: dict[str, Any]) -> str:
    parts = []
    for direction, entry in (chosen.get("latency") or {}).items():
        jitter = f" ± {entry['jitter']:g}" if entry.get("jitter") else ""
        parts.append(f"{entry['ms']:g}{jitter} ms added {ARROW[direction]}")
    for direction, share in (chosen.get("drop") or {}).items():
        parts.append(f"{share:.0%} of notifications {ARROW[direction]} dropped")
    parts += [f"{e['method']} answered with error {e['code']}" for e in chosen.get("errors") or []]
    return "; ".join(parts)


# --- what the page shows ----------------------------------------------------------------------


def tap_context(state: dict[str, Any]) -> dict[str, Any]:
    """What the tap templates show of a tap's state (empty: the tap is not running)."""
    held = [{**h, "arrow": ARROW.get(h.get("direction", ""), "")} for h in state.get("held") or []]
    chosen = state.get("faults") or {}
    once = {ARROW.get(d, d): how for d, how in (state.get("once") or {}).items()}
    return {
        "running": bool(state),
        "held": held,
        "rules": [{"text": _rule_text(rule)} for rule in state.get("rules") or []],
        "faults_text": _faults_text(chosen),
        "faults": chosen,
        "drop_percent": {d: round(share * 100) for d, share in (chosen.get("drop") or {}).items()},
        "error": (chosen.get("errors") or [{}])[0],
        "once": once,
    }


async def live_state(session: McpSession) -> dict[str, Any]:
    """The tap's state for the session page (empty when the tap is not running)."""
    run = tap_control.target_of(session)
    if not run or not session.is_live:
        return {}
    try:
        answer = await tap_control.command(run, {"op": "state"}, timeout=2.0)
    except (tap_control.TapRefused, tap_control.TapUnreachable):
        return {}
    state = answer.get("state")
    return state if isinstance(state, dict) else {}


def render_live(session: McpSession, state: dict[str, Any]) -> str:
    """The out-of-band fragments a tab swaps in when the tap's state changes."""
    context = {"session": session, "oob": True, "tap": tap_context(state)}
    return render_to_string("sessions/tap/_live.html", context)


render_live_async = sync_to_async(render_live)
