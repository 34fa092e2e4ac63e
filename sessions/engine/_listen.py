"""subscriptions/listen (2026-07-28): the stream on which a stateless client opts in to change notifications.

The stateless revision has no standing GET stream and no resources/subscribe. A client sends one
long-lived ``subscriptions/listen`` request naming the notifications it wants (tool, prompt and
resource list changes; updates of given resource URIs). The server's first frame on it is
``notifications/subscriptions/acknowledged`` with the subset it will honour; every frame carries the
request's id in ``_meta["io.modelcontextprotocol/subscriptionId"]``; a result ends it gracefully.
This module keeps the books and the rules; ``ClientSession.listen`` drives it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._frames import Frame

if TYPE_CHECKING:
    from ._requests import RequestHandle

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LISTEN = "subscriptions/listen"
# The change notifications that ride listen streams in 2026-07-28, and nowhere else.
LIST_CHANGED = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}
RESOURCE_UPDATED = "notifications/resources/updated"
LISTEN_METHODS = frozenset({*LIST_CHANGED, RESOURCE_UPDATED})
_CAPABILITY_OF = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}


def wanted(server_capabilities: dict[str, Any], uris: list[str]) -> dict[str, Any]:
    """The filter to ask for: list changes of every feature the server has, and updates of ``uris``."""
    notifications: dict[str, Any] = {
        key: True for cap, key in _CAPABILITY_OF.items() if isinstance(server_capabilities.get(cap), dict)
    }
    if uris:
        notifications["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return notifications


def describe(notifications: dict[str, Any]) -> str:
    kinds = [key.removesuffix("ListChanged") for key in _CAPABILITY_OF.values() if notifications.get(key)]
    uris = notifications.get("resourceSubscriptions") or []
    parts = [f"list changes of {', '.join(kinds)}" if kinds else "no list changes"]
    parts.append(
        f"updates of {len(uris)} resource{'s' if len(uris) != 1 else ''}" if uris else "no resources"
    )
    return "; ".join(parts)


@dataclass
class ListenStream:
    """One subscriptions/listen request: what it asked for, and what the server agreed to."""

    request_id: int
    requested: dict[str, Any]
    ack: asyncio.Future[dict[str, Any]]
    honored: dict[str, Any] | None = None
    ended: str | None = None
    handle: RequestHandle | None = None

    @property
    def uris(self) -> list[str]:
        """The resources whose updates this stream asked for."""
        return list(self.requested.get("resourceSubscriptions") or [])

    def admits(self, method: str, params: dict[str, Any]) -> bool:
        honored = self.honored or {}
        if method == RESOURCE_UPDATED:
            return params.get("uri") in (honored.get("resourceSubscriptions") or [])
        return honored.get(LIST_CHANGED[method]) is True


class Listens:
    """The listen streams of one session, and the rules their frames are held to."""

    def __init__(self) -> None:
        self.streams: dict[int, ListenStream] = {}
        self.current: ListenStream | None = None

    def open(self, request_id: int, requested: dict[str, Any]) -> ListenStream:
        stream = ListenStream(request_id, requested, asyncio.get_running_loop().create_future())
        self.streams[request_id] = stream
        return stream

    def forget(self, stream: ListenStream, why: str) -> None:
        stream.ended = why
        if not stream.ack.done():
            stream.ack.cancel()
        self.streams.pop(stream.request_id, None)
        if self.current is stream:
            self.current = None

    def ended(self, stream: ListenStream, result: asyncio.Future[Any], *, closing: bool) -> Frame | None:
        """A stream's request ended: forget it; return a state frame saying so if it was the current one."""
        if stream.ended is not None or closing:
            self.forget(stream, stream.ended or "closed")
            return None
        if result.cancelled():
            why = "cancelled"
        elif result.exception() is not None:
            why = f"failed: {result.exception()}"
        else:
            why = "ended by the server (a graceful close)"
        current = self.current is stream
        self.forget(stream, why)
        if not current:
            return None
        return Frame(
            "state",
            "local",
            transport={"state": "listen-ended", "subscription_id": stream.request_id},
            note=f"subscriptions/listen {stream.request_id!r} {why}: no change notifications "
            "arrive until the client listens again",
        )

    def check(self, method: str, params: dict[str, Any], frame: Frame, at: str) -> None:
        """Hold an incoming acknowledgement or change notification to the listen rules (stateless only)."""
        meta = params.get("_meta")
        sid = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if sid is None:
            if method == ACKNOWLEDGED:
                frame.flag(
                    "subscription-id",
                    "error",
                    f"{at}the acknowledgement must carry _meta {SUBSCRIPTION_ID!r}",
                )
            else:
                frame.flag(
                    "outside-listen",
                    "error",
                    f"{at}in 2026-07-28, {method} rides a subscriptions/listen stream and must carry "
                    f"_meta {SUBSCRIPTION_ID!r}",
                )
            return
        stream = self.streams.get(sid) if isinstance(sid, int) else None
        if stream is None:
            frame.flag("unknown-subscription", "error", f"{at}no open subscriptions/listen has id {sid!r}")
            return
        if method == ACKNOWLEDGED:
            self._acknowledge(stream, params, frame, at)
            return
        if stream.honored is None:
            frame.flag("before-acknowledged", "error", f"{at}{method} before the stream was acknowledged")
        elif not stream.admits(method, params):
            frame.flag(
                "unrequested-notification",
                "error",
                f"{at}{method} was not acknowledged on subscriptions/listen {sid!r}"
                + (f" (uri {params.get('uri')!r})" if method == RESOURCE_UPDATED else ""),
            )
        frame.note = frame.note or f"on subscriptions/listen {sid!r}"

    @staticmethod
    def _acknowledge(stream: ListenStream, params: dict[str, Any], frame: Frame, at: str) -> None:
        honored = params.get("notifications")
        if stream.honored is not None:
            frame.flag(
                "duplicate-ack",
                "error",
                f"{at}subscriptions/listen {stream.request_id!r} was acknowledged twice",
            )
            return
        if not isinstance(honored, dict):
            frame.flag(
                "invalid-params", "error", f"{at}the acknowledgement must carry a notifications object"
            )
            honored = {}
        extra = [
            key
            for key, value in honored.items()
            if key != "resourceSubscriptions" and value and not stream.requested.get(key)
        ]
        uris = honored.get("resourceSubscriptions") or []
        extra += [
            f"resource {uri!r}"
            for uri in uris
            if uri not in (stream.requested.get("resourceSubscriptions") or [])
        ]
        if extra:
            frame.flag(
                "ack-not-requested", "error", f"{at}acknowledges what was not asked for: {', '.join(extra)}"
            )
        refused = [
            key
            for key, value in stream.requested.items()
            if key != "resourceSubscriptions" and value and not honored.get(key)
        ]
        refused += [uri for uri in stream.requested.get("resourceSubscriptions") or [] if uri not in uris]
        stream.honored = honored
        frame.note = f"subscriptions/listen {stream.request_id!r} acknowledged: {describe(honored)}" + (
            f" (not honoured: {', '.join(map(str, refused))})" if refused else ""
        )
        if not stream.ack.done():
            stream.ack.set_result(honored)
