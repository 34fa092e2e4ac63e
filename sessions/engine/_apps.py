"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865): what the extension says of tools and views.

Pure functions, no I/O: which tool has a view (``_meta.ui.resourceUri``, or the deprecated flat
``_meta["ui/resourceUri"]``), who may call a tool (``_meta.ui.visibility``), the view's HTML in a
``resources/read`` result, and the Content-Security-Policy a view runs under, built from the
resource's ``_meta.ui.csp`` and nothing else.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._frames import Frame

__all__ = [
    "APP_MESSAGE_STATE",
    "APP_VIOLATIONS",
    "MAX_APP_MESSAGES",
    "UI_EXTENSION",
    "UI_MIME_TYPE",
    "UI_PROTOCOL_VERSIONS",
    "View",
    "app_frames",
    "tool_view_uri",
    "tool_visibility",
    "view_checks",
    "view_csp",
    "view_of",
]

UI_EXTENSION = "io.modelcontextprotocol/ui"
UI_MIME_TYPE = "text/html;profile=mcp-app"
# The view protocol's revisions the host speaks, newest first (the SDK's LATEST_PROTOCOL_VERSION).
UI_PROTOCOL_VERSIONS: tuple[str, ...] = ("2026-01-26",)
DEFAULT_VISIBILITY = ("model", "app")
# A source a CSP may carry: an origin or host pattern, nothing that would end or add a directive.
_SOURCE = re.compile(r"^(?:(?:https?|wss?)://)?(?:\*\.)?[A-Za-z0-9.-]+(?::(?:\d{1,5}|\*))?(?:/[^\s;,']*)?$")
MAX_SOURCES = 50


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _ui(meta: Any) -> dict[str, Any]:
    return _dict(_dict(meta).get("ui"))


def tool_view_uri(tool: Any) -> str | None:
    """The ``ui://`` resource a tool's view lives at, or None for a tool without a view."""
    meta = _dict(_dict(tool).get("_meta"))
    uri = _ui(meta).get("resourceUri")
    if not isinstance(uri, str):
        uri = meta.get("ui/resourceUri")  # deprecated, still what older servers send
    return uri if isinstance(uri, str) and uri.startswith("ui://") else None


def tool_visibility(tool: Any) -> tuple[str, ...]:
    """Who may call the tool: "model" (the agent), "app" (views of the same server), or both."""
    visibility = _ui(_dict(tool).get("_meta")).get("visibility")
    if not isinstance(visibility, list):
        return DEFAULT_VISIBILITY
    return tuple(v for v in visibility if v in DEFAULT_VISIBILITY)


def _sources(value: Any) -> list[str]:
    """The well-formed sources of a declared domain list; anything else is dropped, never passed on."""
    if not isinstance(value, list):
        return []
    return [v for v in value[:MAX_SOURCES] if isinstance(v, str) and _SOURCE.match(v)]


def view_csp(ui: Any, *, offline: bool = False) -> str:
    """The policy a view runs under: its inline code, plus only the domains its ``csp`` declares
    (none when ``offline``: a view rendered from a recording reaches no network at all)."""
    csp = {} if offline else _dict(_dict(ui).get("csp"))
    connect = _sources(csp.get("connectDomains"))
    resources = _sources(csp.get("resourceDomains"))
    frames = _sources(csp.get("frameDomains"))
    base = _sources(csp.get("baseUriDomains"))

    def directive(name: str, *sources: str) -> str:
        return " ".join([name, *sources]) if sources else f"{name} 'none'"

    # 'self' is never granted: the document is served from the inspector's origin, which the view
    # must not reach.
    return "; ".join(
        [
            "default-src 'none'",
            directive("script-src", "'unsafe-inline'", *resources),
            directive("style-src", "'unsafe-inline'", *resources),
            directive("img-src", "data:", "blob:", *resources),
            directive("font-src", "data:", *resources),
            directive("media-src", "data:", "blob:", *resources),
            directive("connect-src", *connect),
            directive("frame-src", *frames),
            directive("base-uri", *base),
            "object-src 'none'",
            "form-action 'none'",
            "frame-ancestors 'self'",
            # An opaque origin even when the document is opened on its own, outside our iframe.
            "sandbox allow-scripts",
        ]
    )


def view_checks(view: View) -> list[tuple[str, str]]:
    """What a view's resource gets wrong against the extension's rules: (code, message) pairs."""
    checks = []
    if view.mime_type != UI_MIME_TYPE:
        checks.append(("apps-mime-type", f"mimeType is {view.mime_type!r}, not {UI_MIME_TYPE!r}"))
    csp = _dict(view.ui.get("csp"))
    for key in ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"):
        declared = csp.get(key)
        if declared is not None and not isinstance(declared, list):
            checks.append(("apps-csp-malformed", f"csp.{key} is not a list: ignored"))
            continue
        dropped = [v for v in declared or [] if v not in _sources(declared)]
        if dropped:
            shown = ", ".join(repr(v)[:80] for v in dropped[:5])
            checks.append(("apps-csp-dropped", f"csp.{key}: {shown} not an origin or host pattern: dropped"))
    return checks


@dataclass(frozen=True)
class View:
    """A view's document and its ``_meta.ui``, as a resources/read result carries them."""

    uri: str
    html: str
    mime_type: str
    ui: dict[str, Any]


def view_of(result: Any, uri: str, listed_ui: Any = None) -> View | None:
    """The view at ``uri`` in a resources/read result: the read item's ``_meta.ui`` wins over the
    listing entry's (``listed_ui``). None when the result holds no HTML for it."""
    contents = [c for c in _dict(result).get("contents") or [] if isinstance(c, dict)]
    item = next((c for c in contents if c.get("uri") == uri), contents[0] if contents else None)
    if item is None:
        return None
    html = item.get("text")
    if not isinstance(html, str):
        try:
            html = base64.b64decode(str(item.get("blob") or ""), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if not html:
        return None
    ui = _ui(item.get("_meta")) or _dict(listed_ui)
    return View(uri, html, str(item.get("mimeType") or ""), ui)


APP_MESSAGE_STATE = "app-message"
"""``transport.state`` of a local frame holding one message between a view and its host."""
# What the host saw a view do against the extension's rules: the verdict each gets on its frame.
APP_VIOLATIONS: dict[str, str] = {
    "apps-before-initialize": "the view sent a request before ui/initialize was answered",
    "apps-tool-not-visible": 'the view called a tool whose _meta.ui.visibility leaves out "app"',
    "apps-bad-size": "ui/notifications/size-changed without a positive, finite height",
    "apps-not-jsonrpc": "the view posted a message that is not JSON-RPC 2.0",
}
MAX_APP_MESSAGES = 200
_ARROWS = {"in": "view → host", "out": "host → view"}


def _what(message: Any) -> str:
    message = _dict(message)
    method = message.get("method")
    if isinstance(method, str):
        return method[:100]
    kind = "error" if "error" in message else "result"
    return f"{kind} #{str(message.get('id'))[:40]}"


def app_frames(view: str, messages: list[Any], dropped: int = 0) -> Iterator[Frame]:
    """The local frames of a batch of view↔host messages (at most ``MAX_APP_MESSAGES``), each with
    the verdict the host gave it; and one saying how many the host left out, if it left any."""
    for entry in messages[:MAX_APP_MESSAGES]:
        entry = _dict(entry)
        direction = "in" if entry.get("direction") == "in" else "out"
        message = entry.get("message")
        raw = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        app: dict[str, Any] = {"view": view[:2000], "direction": direction, "what": _what(message)}
        caused = entry.get("caused")
        if direction == "out" and (
            (isinstance(caused, int) and not isinstance(caused, bool))
            or (isinstance(caused, str) and len(caused) <= 100)
        ):
            app["caused"] = caused  # the id of the request the view's request made, which this answers
        frame = Frame(
            "state",
            "local",
            raw=raw,
            transport={"state": APP_MESSAGE_STATE, "app": app},
            note=f"{_ARROWS[direction]} {_what(message)}",
        )
        violation = entry.get("violation")
        if isinstance(violation, str) and violation in APP_VIOLATIONS:
            frame.flag(violation, "warning", APP_VIOLATIONS[violation])
        yield frame
    left_out = max(0, int(dropped)) + max(0, len(messages) - MAX_APP_MESSAGES)
    if left_out:
        note = f"{left_out} more view↔host messages of {view[:200]} not recorded (the view sent too many)"
        frame = Frame(
            "state", "local", transport={"state": APP_MESSAGE_STATE, "app": {"view": view[:2000]}}, note=note
        )
        frame.flag("apps-flood", "warning", "the view sent messages faster than the host records them")
        yield frame
