"""Breakpoints and faults on a hosted tap session: the local HTTP tap's gates, in the web process.

Each host connection a web process records (``HostedTap``) has its own ``HttpTraffic``: the rules,
faults and held messages of the local HTTP tap (``inspector/tap/_http_gate.py``), asked by the tap
route for each POST body the host sends to the MCP endpoint before it goes upstream, and for each
JSON answer and SSE event of the server's before the host gets it. The session's
page commands it over the channel layer (``sessions.runtime.tap_control``: a ``tap.command`` to the
session's ``worker_channel``, this process's own), as it commands a local tap over its socket, and
each change is published to the session's group (``TapChanged``), as the local ingester does.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import time
from typing import TYPE_CHECKING, Any

from inspector.tap._control import SEQS_WAIT
from inspector.tap._gate import Change, TrafficError
from inspector.tap._http_gate import HttpTraffic
from sessions.runtime import messages as m

if TYPE_CHECKING:
    from channels.layers import BaseChannelLayer

__all__ = ["Controls"]

NO_CLOSE = (
    "a tap endpoint's connections are the web server's: close them from the host, or revoke the endpoint"
)
WATCH_EVERY = 0.05
"""Seconds between looks at whether the traffic changed (a person's click is shown well within 0.25 s)."""


class _Items:
    """What the gates record (a fault, a held message decided) goes to the connection's frames."""

    def __init__(self, put: Any) -> None:
        self.put_at = put

    def put(self, item: tuple[Any, ...]) -> None:
        what, payload, wall, mono = item
        self.put_at(what, payload, wall, mono)


class Controls:
    """One hosted connection's breakpoints and faults, and their watchers."""

    def __init__(self, put_at: Any, label: str) -> None:
        self.traffic = HttpTraffic(_Items(put_at))
        self.traffic.server_label = label
        self.watcher: asyncio.Task[None] | None = None

    def watch(self, layer: BaseChannelLayer, group: str) -> None:
        """Publish the state to the session's tabs whenever it changes, until ``close``."""
        self.watcher = asyncio.create_task(self._watch(layer, group), name="hosted-tap-controls")

    async def _watch(self, layer: BaseChannelLayer, group: str) -> None:
        changed = self.traffic.changed
        while True:
            await asyncio.sleep(WATCH_EVERY)
            if changed.is_set():
                changed.clear()
                with contextlib.suppress(Exception):
                    event = m.TapChanged(self.traffic.snapshot())
                    await layer.group_send(group, m.encode_event(event))

    async def close(self, layer: BaseChannelLayer, group: str) -> None:
        """The connection ended: nothing is held any more, and the tabs hear so."""
        if self.watcher is not None:
            self.watcher.cancel()
        with contextlib.suppress(Exception):
            await layer.group_send(group, m.encode_event(m.TapChanged({})))

    async def command(self, command: dict[str, Any]) -> dict[str, Any]:
        """One command, as ``inspector/tap/_control.py`` answers it on a local tap's socket."""
        traffic, op = self.traffic, command.get("op")
        try:
            if op == "state":
                return {"ok": True, "state": traffic.snapshot()}
            if op == "rules":
                traffic.set_rules(command.get("rules"))
            elif op == "faults":
                traffic.set_faults(command.get("faults"))
            elif op == "fault":
                if command.get("action") == "close":
                    raise TrafficError(NO_CLOSE)
                traffic.once(str(command.get("action")), str(command.get("direction") or ""))
            elif op == "release":
                how = {k: command.get(k) for k in ("raw", "ms", "code", "message")}
                action, by = str(command.get("action")), command.get("by")
                change = traffic.release(command.get("id"), action, by, **how)
                return {"ok": True, "seqs": await _seqs(change), "state": traffic.snapshot()}
            else:
                raise TrafficError(f"unknown command {op!r}")
        except TrafficError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "state": traffic.snapshot()}


async def _seqs(change: Change | None) -> dict[str, int]:
    """The frames a decision made, once the connection's recording has numbered them (this loop's)."""
    if change is None or change.seqs is None:
        return {}
    deadline = time.monotonic() + SEQS_WAIT
    while time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            return change.seqs.get_nowait()
        await asyncio.sleep(0.01)
    return {}
