"""Breakpoints and faults on the HTTP tap: the stdio tap's rules, faults and held messages, per message.

The proxy (``_proxy``) asks a direction's gate about each JSON-RPC message before it passes: a POST's
body to the MCP endpoint (``out``) before it goes upstream; a JSON response body, or one SSE event of a
stream (``in``), before it goes to the host. With nothing set, the proxy does not ask (one attribute
read per message). Otherwise the gate decides as the stdio gate does (``_gate``: an error fault, a
dropped notification, a truncated or corrupted message, a breakpoint, added latency) and returns a
``Verdict``; a held message is a future the control thread settles through the proxy's event loop,
which the exchange's coroutine awaits, so the host and the server wait only on that exchange.

The tap answers only the host's requests itself: answering a server's request would mean a POST of
the tap's own towards the server, in the host's HTTP session.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from inspector.tap._gate import WHO, Change, Gate, Items, Traffic, TrafficError, _error
from inspector.tap._match import Described, matches

__all__ = ["EventCutter", "HttpGate", "HttpTraffic", "Verdict", "event_data", "gated_events", "with_data"]

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


@dataclass(slots=True)
class Verdict:
    """What the proxy does with one message: ``forward`` ``body``, ``answer`` its sender with ``body``
    (the tap's own JSON-RPC answer), or ``drop`` it; ``change``: what to record of it."""

    action: str
    body: bytes
    change: Change | None = None
    kind: str = ""


class HttpGate(Gate):
    """One direction through the HTTP tap; ``decide`` runs in the proxy's event loop."""

    def __init__(self, traffic: Traffic, what: str) -> None:
        super().__init__(traffic, what, None)
        self.loop: asyncio.AbstractEventLoop | None = None

    def on(self) -> bool:
        """Whether the proxy asks this gate (read unlocked: the fields are replaced whole)."""
        traffic = self.traffic
        return bool(traffic.rules or traffic.faults or self.once)

    async def decide(self, body: bytes) -> Verdict:
        wall, mono = time.time(), time.monotonic()
        traffic = self.traffic
        facts = traffic.describe(self.direction, body)
        if self.direction == "out" and facts.kind == "request":
            answered = self._answered_by_fault(body, facts)
            if answered is not None:
                return answered
        share = traffic.faults.get("drop", {}).get(self.direction, 0)
        if facts.kind == "notification" and share and random.random() < share:
            what = f"dropped {WHO[self.direction]} {facts.method}"
            note = f"{what}: not forwarded (a fault)"
            dropped = Change(self.direction, original=body, original_note=note)
            dropped.fault = {"what": "drop", "direction": self.direction, "share": share}
            dropped.fault_note = f"fault: {what} ({share:.0%} of notifications)"
            return Verdict("drop", b"", dropped, facts.kind)
        change: Change | None = None
        if self.once:
            body, change = self._spoilt(body)
        else:
            for rule in traffic.rules:
                if matches(rule, facts, traffic.server_label):
                    verdict = await self._held(body, facts, wall, mono)
                    if verdict.action != "forward":
                        return verdict
                    body, change = verdict.body, verdict.change
                    break
        latency = traffic.faults.get("latency", {}).get(self.direction)
        if latency:
            jitter = latency.get("jitter", 0)
            ms = max(0.0, latency["ms"] + random.uniform(-jitter, jitter))
            if change is None:
                change = Change(self.direction, sent=body)
            change.fault = change.fault or {"what": "latency", "direction": self.direction, "ms": ms}
            change.fault_note = (
                change.fault_note or f"fault: added {ms:.0f} ms to {WHO[self.direction]} message"
            )
            await asyncio.sleep(ms / 1000)
        return Verdict("forward", body, change, facts.kind)

    def _answered_by_fault(self, body: bytes, facts: Described) -> Verdict | None:
        for entry in self.traffic.faults.get("errors", ()):
            if facts.method == entry["method"]:
                reply = _error(facts.rpc_id, entry["code"], entry["message"]).rstrip(b"\n")
                what = f"answered {WHO[self.direction]} {facts.method} with error {entry['code']}"
                change = Change(
                    self.direction, original=body, original_note=f"{what}: not forwarded (a fault)"
                )
                change.fault = {"what": "error", "method": facts.method, "code": entry["code"]}
                change.fault_note = f"fault: {what}"
                change.reply, change.reply_note = reply, "the tap's answer (a fault)"
                return Verdict("answer", reply, change, facts.kind)
        return None

    def _spoilt(self, body: bytes) -> tuple[bytes, Change]:
        """Truncate or corrupt the message (a one-shot fault)."""
        how, self.once = self.once, ""
        if how == "truncate":
            spoilt = body[: len(body) // 2]
            note = (
                f"fault: truncated {WHO[self.direction]} next message from {len(body)} to {len(spoilt)} bytes"
            )
        else:
            at = len(body) // 2
            spoilt = body[:at] + b"\xff" + body[at + 1 :]  # never UTF-8, so never JSON
            note = f"fault: corrupted byte {at} of {WHO[self.direction]} next message"
        change = Change(self.direction, sent=spoilt, sent_note=f"{how}d by a fault", original=body)
        change.original_note = f"as read, before it was {how}d"
        change.fault, change.fault_note = {"what": how, "direction": self.direction, "size": len(body)}, note
        with self.traffic.lock:
            self.traffic._bump()
        return spoilt, change

    async def _held(self, body: bytes, facts: Described, wall: float, mono: float) -> Verdict:
        """Hold the message until a person decides (or the exchange ends: the card goes)."""
        loop = asyncio.get_running_loop()
        decided: asyncio.Future[Verdict] = loop.create_future()

        def settle(action: str, change: Change, ms: int) -> None:
            if change.sent is not None:
                change.sent = change.sent.rstrip(b"\r\n")
            if change.reply is not None:
                change.reply = change.reply.rstrip(b"\r\n")
            if action in ("forward", "edit", "delay"):
                verdict = Verdict("forward", change.sent or b"", change, facts.kind)
            elif action == "drop":
                verdict = Verdict("drop", b"", change, facts.kind)
            else:
                verdict = Verdict("answer", change.reply or b"", change, facts.kind)

            def resolve() -> None:
                if not decided.done():
                    decided.set_result(verdict)

            loop.call_soon_threadsafe(loop.call_later, ms / 1000, resolve)

        held = self.traffic.hold(self, body, facts, wall, mono, settle)
        try:
            return await decided
        finally:
            if decided.cancelled() or not decided.done():  # the exchange was cancelled while it waited
                self.traffic.withdraw(held.id)


class HttpTraffic(Traffic):
    """The HTTP tap's rules, faults and held messages; ``on_close`` closes the host's connections."""

    def __init__(self, items: Items) -> None:
        super().__init__(items, None, None)
        self.http = {"out": HttpGate(self, "client"), "in": HttpGate(self, "server")}
        self.gates = {**self.http}

    def release(self, held_id: Any, action: str, by: Any, **how: Any) -> Change | None:
        with self.lock:
            held = self.held.get(held_id) if isinstance(held_id, int) else None
        if action == "error" and held is not None and held.gate.direction == "in":
            raise TrafficError(
                "the HTTP tap answers only the host's requests itself: forward, edit or drop this one"
            )
        return super().release(held_id, action, by, **how)

    def closed(self, wall: float, mono: float) -> None:
        change = Change("out", fault={"what": "close"})
        change.fault_note = "fault: closed the host's connections to the tap"
        self.gates["out"].record(change, wall, mono)


# --- SSE events, one at a time ----------------------------------------------------------------------


class EventCutter:
    """Cut a stream's bytes into whole SSE events once a gate is asked; bytes that passed before (the
    rest of an event already begun) pass as they are."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.tail = b"\n\n"  # the last bytes passed: at the start of a stream, an event begins

    def passed(self, data: bytes) -> None:
        """Bytes forwarded without a look (no gate asked)."""
        if data:
            self.tail = (self.tail + data)[-4:]

    def cut(self, data: bytes) -> list[tuple[bytes, bool]]:
        """``(bytes, whole event)`` pieces of ``data`` in order; an event's unfinished end waits."""
        pieces: list[tuple[bytes, bool]] = []
        if not self.buffer and not _ends_event(self.tail):
            joined = self.tail + data
            found = _EVENT_END.search(joined)
            while found is not None and found.end() <= len(self.tail):
                found = _EVENT_END.search(joined, found.start() + 1)
            if found is None:
                self.passed(data)
                return [(data, False)]
            cut = found.end() - len(self.tail)
            pieces.append((data[:cut], False))
            self.passed(data[:cut])
            data = data[cut:]
        self.buffer += data
        while (found := _EVENT_END.search(self.buffer)) is not None:
            block = bytes(self.buffer[: found.end()])
            del self.buffer[: found.end()]
            pieces.append((block, True))
            self.tail = b"\n\n"
        return pieces


async def gated_events(
    gate: HttpGate, cutter: EventCutter, data: bytes, changed: Callable[[Change], None]
) -> AsyncIterator[bytes]:
    """What of ``data`` the host gets, in order: each whole event through ``gate`` (a dropped one left
    out, an edited one carrying its new data); ``changed`` hears each change the gate made."""
    for piece, whole in cutter.cut(data):
        message = event_data(piece) if whole and gate.on() else None
        if message is not None:
            verdict = await gate.decide(message)
            if verdict.change is not None:
                changed(verdict.change)
            if verdict.action != "forward":
                continue  # dropped: the host never gets it
            if verdict.body != message:
                piece = with_data(piece, verdict.body)
        yield piece


def _ends_event(tail: bytes) -> bool:
    return tail.endswith((b"\n\n", b"\r\r", b"\r\n\r\n"))


def event_data(block: bytes) -> bytes | None:
    """A ``message`` event's data (its data lines joined), or ``None`` for any other event."""
    kind, data = "message", []
    for line in block.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        name, sep, value = line.partition(b":")
        value = value.removeprefix(b" ") if sep else b""
        if name == b"event":
            kind = value.decode("utf-8", "replace")
        elif name == b"data":
            data.append(value)
    if kind != "message" or not data:
        return None
    return b"\n".join(data)


def with_data(block: bytes, data: bytes) -> bytes:
    """The event ``block`` carrying ``data`` instead of its own (its id, type and retry kept)."""
    lines = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    out: list[bytes] = []
    placed = False
    for line in lines:
        if not line:
            continue
        if line.partition(b":")[0] == b"data":
            if not placed:
                out.extend(b"data: " + part for part in data.split(b"\n"))
                placed = True
            continue
        out.append(line)
    if not placed:
        out.extend(b"data: " + part for part in data.split(b"\n"))
    return b"\n".join(out) + b"\n\n"
