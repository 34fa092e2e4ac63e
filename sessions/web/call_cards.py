"""A call card as HTML, written in Python, for the answer to every call a person makes.

Rendering ``sessions/_call.html`` through the template engine was a tenth of the app's CPU for a
tool call (issue 10): about fifty variable lookups, three includes, a dozen lookups of keys a dict
does not have (each of which makes the engine list the dict's attributes). ``card_html`` writes the
same bytes: the card's frame and state here, and its body here for the common answer (a finished
``tools/call`` whose content is text), else through ``sessions/calls/_body.html`` as before.
``tests/test_call_cards.py`` holds it to the template over every shape of card; the session page,
which draws its ten cards once, still includes the template.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest
from django.template.defaultfilters import floatformat
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from sessions.timeline.shown import MISSING, Shown, lookup

__all__ = ["card_html"]

_BANNER = (
    '<p class="tool-error-banner" role="alert"><strong>isError: true</strong> — the tool reports that'
    " this call failed (a tool error, not a protocol error).</p>"
)


def _true(value: Any) -> bool:
    """``{% if value %}``: what is missing is false."""
    return value is not MISSING and bool(value)


@functools.cache
def _shown() -> Shown:
    """``{{ value }}`` inside the card's ``{% localize off %}``: one for all cards (no setting moves it)."""
    shown = Shown()
    shown.context.use_l10n = False
    return shown


def _kind(running: Any, outcome: Any) -> str:
    """The card's class after ``call``: running, failed (an error), tool-error (isError), or none."""
    if _true(running):
        return " running"
    if _true(lookup(outcome, "error")):
        return " failed"
    if _true(lookup(outcome, "result", "isError")):
        return " tool-error"
    return ""


def _state(context: Mapping[str, Any], show: Shown, kind: str) -> str:
    """``sessions/calls/_state.html`` with ``oob`` false."""
    rpc_id = show(context.get("rpc_id", MISSING))
    status = {
        " running": '<span class="status status-running" role="status">running</span>\n  ',
        " failed": '<span class="status status-failed" role="status">error</span>\n  ',
        " tool-error": '<span class="status status-failed" role="status">tool error</span>\n  ',
        "": '<span class="status status-ready" role="status">done</span>',
    }[kind]
    latency = context.get("latency_ms")
    timing = "" if latency is None else f'<span class="muted">{show(floatformat(latency, 1))} ms</span>'
    seq = context.get("request_seq", MISSING)
    link = ""
    if _true(seq):
        url = reverse("frame", args=[context["session"].public_id, seq])
        link = (
            f'<a class="muted" href="#f-{show(seq)}" hx-get="{show(url)}" hx-target="#frame-detail">'
            f"frame #{show(seq)}</a>"
        )
    return f'<span id="call-{rpc_id}-state" class="call-state">\n  {status}\n  {timing}\n  {link}\n</span>\n'


def _text_only(context: Mapping[str, Any], kind: str) -> list[dict[str, Any]] | None:
    """The blocks of a finished tools/call answer of text alone (its body drawn here), else None."""
    outcome = context.get("outcome")
    if (
        kind not in ("", " tool-error")
        or context.get("method") != "tools/call"
        or not isinstance(outcome, dict)
    ):
        return None
    result = outcome.get("result")
    if (
        _true(outcome.get("too_big"))
        or not isinstance(result, dict)
        or _true(lookup(result, "task", "taskId"))
    ):
        return None
    content = result.get("content")
    if result.get("structuredContent") is not None or _true(context.get("output_verdict")):
        return None
    if not isinstance(content, list) or not content:
        return None
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text" or _true(block.get("annotations")):
            return None
    return content


def _body(context: Mapping[str, Any], show: Shown, kind: str, request: HttpRequest | None) -> str:
    """``sessions/calls/_body.html`` with ``oob`` false."""
    content = _text_only(context, kind)
    if content is None:
        return render_to_string("sessions/calls/_body.html", {**context, "oob": False}, request)
    rpc_id = show(context.get("rpc_id", MISSING))
    banner = _BANNER if kind == " tool-error" else ""
    blocks = "".join(
        f'\n<div class="content content-text">\n  <pre class="text">{show(block.get("text", MISSING))}</pre>'
        "\n  \n  \n</div>\n"
        for block in content
    )
    return (
        f'\n<div id="call-{rpc_id}-body" class="call-body" data-call-class="call{kind}">\n  \n    '
        f"{banner}\n{blocks}\n\n\n\n\n    \n  \n</div>\n"
    )


def card_html(context: Mapping[str, Any], request: HttpRequest | None = None) -> SafeString:
    """``sessions/_call.html`` rendered with ``context`` (what ``calls.call_context`` builds)."""
    show = _shown()
    rpc_id = show(context.get("rpc_id", MISSING))
    method = show(context.get("method", MISSING))
    params = context.get("params", MISSING)
    kind = _kind(context.get("running", MISSING), context.get("outcome", MISSING))
    oob = ' hx-swap-oob="true"' if _true(context.get("oob", MISSING)) else ""
    name, uri = lookup(params, "name"), lookup(params, "uri")
    target = (
        f"<code>{show(name)}</code>" if _true(name) else f"<code>{show(uri)}</code>" if _true(uri) else ""
    )
    arguments = ""
    if _true(lookup(params, "arguments")) or _true(lookup(params, "argument")):
        arguments = (
            '<details><summary>Arguments</summary><pre class="json">'
            f"{show(context.get('arguments_json', MISSING))}</pre></details>"
        )
    return mark_safe(  # noqa: S308 - every value in it went through show(), the template's escaping
        f'<article id="call-{rpc_id}" class="call{kind}" data-rpc-id="{rpc_id}"{oob}'
        f' aria-label="{method} request {rpc_id}">\n  <header>\n'
        f'    <strong class="method">{method}</strong>\n'
        f'    {target}\n    <span class="muted">#{rpc_id}</span>\n    {_state(context, show, kind)}\n'
        f"  </header>\n  {arguments}\n  {_body(context, show, kind, request)}\n</article>\n"
    )
