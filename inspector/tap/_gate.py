"""Breakpoints and faults: the tap's way for a message when rules or faults are set.

With none set, the pumps (``_forward``) forward every chunk as they read it; a ``Gate`` per direction
costs them one attribute read. Once the inspector sets a rule or a fault (``_control``), both gates
open: the pumps hand each chunk to their gate, which cuts it into lines and decides each one before it
is forwarded: answered with an error or dropped by a fault, truncated or corrupted, held for a person
(a breakpoint), delayed, or forwarded. A gate closes again, in its pump's thread, once nothing is set,
held or waiting and no line is half read, so the pump's own writes never meet another thread's.

What happens to a message the tap changed goes to the spool as one ``("tap", Change, ...)`` item: the
spool records the fault as a frame of its own, the message as the receiver got it, and the original
bytes when they were not forwarded as read.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from inspector.tap._match import MAX_RULES, Described, RuleError, checked_rule, describe, matches

__all__ = ["Change", "Gate", "Held", "Traffic", "TrafficError"]

SHOWN_BYTES = 256 * 1024
"""How much of a held message the inspector is sent to show and edit."""
MAX_DELAY_MS = 600_000
REMEMBERED = 10_000
"""Requests whose method is kept, so a rule on a method also stops their answers."""
OTHER = {"out": "in", "in": "out"}
WHO = {"out": "the host's", "in": "the server's"}


class Items(Protocol):
    """Where what passes goes on its way to the spool thread: its queue, or the HTTP tap's batches."""

    def put(self, item: Any, /) -> None: ...


class TrafficError(ValueError):
    """A control command the tap cannot do, said so a person can fix it."""


@dataclass(slots=True)
class Change:
    """What the tap did to one message (or on its own), for the spool to record."""

    direction: str
    sent: bytes | None = None  # what the receiver got, None if nothing
    sent_note: str = ""
    original: bytes | None = None  # the message as read, when it was not forwarded as read
    original_note: str = ""
    reply: bytes | None = None  # what the tap answered the sender itself
    reply_note: str = ""
    fault: dict[str, Any] | None = None
    fault_note: str = ""
    seqs: queue.SimpleQueue[dict[str, int]] | None = None
    """The spool puts the frames' numbers here once it has made them."""


@dataclass(slots=True)
class Held:
    """A message held in flight until a person decides."""

    id: int
    gate: Gate
    raw: bytes  # with its line end
    facts: Described
    wall: float
    mono: float
    settle: Any = None
    """Called with (action, change, ms) in place of the gate's own forwarding (the HTTP tap's way)."""

    def shown(self) -> dict[str, Any]:
        body = self.raw.rstrip(b"\r\n")
        return {
            "id": self.id,
            "direction": self.gate.direction,
            "kind": self.facts.kind,
            "method": self.facts.method,
            "name": self.facts.name,
            "rpc_id": self.facts.rpc_id if isinstance(self.facts.rpc_id, int | str) else None,
            "raw": body[:SHOWN_BYTES].decode("utf-8", "replace"),
            "size": len(body),
            "cut": len(body) > SHOWN_BYTES,
            "wall": self.wall,
        }


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Gate:
    """One direction through the tap (``client``: host → server, ``server``: server → host)."""

    def __init__(self, traffic: Traffic, what: str, target: int | None) -> None:
        self.traffic = traffic
        self.what = what
        self.direction = "out" if what == "client" else "in"
        self.target = target
        self.active = False
        """Read by the pump for every chunk: whether to hand it here. Set by anyone, cleared by the pump."""
        self.lock = threading.Lock()  # one writer at a time to the target while the gate is open
        self.buffer = bytearray()  # a line not ended yet
        self.passing = False  # the rest of a line the pump began forwarding before the gate opened
        self.pending = 0  # held or delayed messages of this direction
        self.once: str = ""  # truncate or corrupt the next message
        self.delayed: deque[tuple[float, bytes, float, float, Change | None]] = deque()
        self.wakeup = threading.Condition(self.lock)
        self.delayer: threading.Thread | None = None

    # --- the pump's side ------------------------------------------------------------------------

    def take(self, chunk: bytes, last: bytes) -> None:
        """A chunk the pump read while the gate is open (``last``: the chunk it forwarded before)."""
        wall, mono = time.time(), time.monotonic()
        if not self.buffer and last and not last.endswith(b"\n"):
            self.passing = True  # the line's head is already on its way: its tail follows it as is
        data = chunk
        if self.passing:
            end = data.find(b"\n")
            head, data = (data, b"") if end < 0 else (data[: end + 1], data[end + 1 :])
            self.passing = end < 0
            self._write(head, wall, mono)
        self.buffer += data
        while (end := self.buffer.find(b"\n")) >= 0:
            line = bytes(self.buffer[: end + 1])
            del self.buffer[: end + 1]
            self._line(line, wall, mono)
        with self.lock:
            if not (self.buffer or self.passing or self.pending or self.once or self.traffic.wanted()):
                self.active = False

    def end(self) -> None:
        """The source ended: a last line without its end goes as it is."""
        if self.buffer:
            line, self.buffer = bytes(self.buffer), bytearray()
            self._line(line, time.time(), time.monotonic())

    def _line(self, line: bytes, wall: float, mono: float) -> None:
        body = line.rstrip(b"\r\n")
        traffic = self.traffic
        if not body.strip():
            self._write(line, wall, mono)
            return
        facts = traffic.describe(self.direction, body)
        if traffic.answered_by_fault(self, line, facts, wall, mono) or self._dropped(line, facts, wall, mono):
            return
        if self.once:
            self._spoil(line, facts, wall, mono)
            return
        for rule in traffic.rules:
            if matches(rule, facts, traffic.server_label):
                traffic.hold(self, line, facts, wall, mono)
                return
        self.forward(line, wall, mono)

    def _dropped(self, line: bytes, facts: Described, wall: float, mono: float) -> bool:
        share = self.traffic.faults.get("drop", {}).get(self.direction, 0)
        if facts.kind != "notification" or not share or random.random() >= share:
            return False
        what = f"dropped {WHO[self.direction]} {facts.method}"
        fault = {"what": "drop", "direction": self.direction, "share": share}
        change = Change(self.direction, original=line, original_note=f"{what}: not forwarded (a fault)")
        change.fault, change.fault_note = fault, f"fault: {what} ({share:.0%} of notifications)"
        self.record(change, wall, mono)
        return True

    def _spoil(self, line: bytes, facts: Described, wall: float, mono: float) -> None:
        """Truncate or corrupt the message (a one-shot fault), and forward what is left of it."""
        how, self.once = self.once, ""
        body = line.rstrip(b"\r\n")
        if how == "truncate":
            spoilt = body[: len(body) // 2] + b"\n"
            cut = f"from {len(body)} to {len(spoilt) - 1} bytes"
            note = f"fault: truncated {WHO[self.direction]} next message {cut}"
        else:
            at = len(body) // 2
            spoilt = body[:at] + b"\xff" + body[at + 1 :] + b"\n"  # never UTF-8, so never JSON
            note = f"fault: corrupted byte {at} of {WHO[self.direction]} next message"
        fault = {"what": how, "direction": self.direction, "size": len(body)}
        change = Change(self.direction, sent=spoilt, sent_note=f"{how}d by a fault", original=line)
        change.original_note = f"as read, before it was {how}d"
        change.fault, change.fault_note = fault, note
        self.forward(spoilt, wall, mono, change)

    # --- forwarding -----------------------------------------------------------------------------

    def forward(self, line: bytes, wall: float, mono: float, change: Change | None = None) -> None:
        """Forward now, or after the direction's added latency (in order, whatever the jitter)."""
        latency = self.traffic.faults.get("latency", {}).get(self.direction)
        with self.lock:
            if not latency and not self.delayed:
                self._write_locked(line, wall, mono, change)
                return
            ms = 0.0
            if latency:
                jitter = latency.get("jitter", 0)
                ms = max(0.0, latency["ms"] + random.uniform(-jitter, jitter))
            due = max(time.monotonic() + ms / 1000, self.delayed[-1][0] if self.delayed else 0.0)
            if latency:
                added = f"fault: added {ms:.0f} ms to {WHO[self.direction]} message"
                if change is None:
                    change = Change(self.direction, sent=line)
                change.fault = change.fault or {"what": "latency", "direction": self.direction, "ms": ms}
                change.fault_note = change.fault_note or added
            self.delayed.append((due, line, wall, mono, change))
            self.pending += 1
            if self.delayer is None:
                self.delayer = threading.Thread(target=self._delay_line, name="tap-delay", daemon=True)
                self.delayer.start()
            self.wakeup.notify()

    def _delay_line(self) -> None:
        with self.lock:
            while True:
                if not self.delayed:
                    self.wakeup.wait()
                    continue
                due, line, wall, mono, change = self.delayed[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.wakeup.wait(wait)
                    continue
                self.delayed.popleft()
                self._write_locked(line, wall, mono, change)
                self.pending -= 1

    def _write(self, data: bytes, wall: float, mono: float, change: Change | None = None) -> None:
        with self.lock:
            self._write_locked(data, wall, mono, change)

    def _write_locked(self, data: bytes, wall: float, mono: float, change: Change | None) -> None:
        if self.direction == "in":
            # What the server sends is timed as the host gets it: a delay shows in the answer's latency.
            wall, mono = time.time(), time.monotonic()
        self.traffic.items.put(("tap", change, wall, mono) if change else (self.what, data, wall, mono))
        if self.target is not None:
            try:
                _write_all(self.target, data)
            except OSError:
                self.target = None

    def record(self, change: Change, wall: float, mono: float) -> None:
        """Record what the tap did, forwarding nothing in this direction."""
        with self.lock:
            self.traffic.items.put(("tap", change, wall, mono))

    def answer(self, reply: bytes, change: Change, wall: float, mono: float) -> None:
        """Write the tap's own answer to this direction's receiver (the sender of the request).

        Both gates open together, before anything is held or answered, so this direction's pump no
        longer writes unlocked; only a chunk it read before that may still be in its write.
        """
        with self.lock:
            self.traffic.items.put(("tap", change, wall, mono))
            if self.target is not None:
                try:
                    _write_all(self.target, reply)
                except OSError:
                    self.target = None


class Traffic:
    """The tap's rules, faults and held messages, shared by both gates and the control channel."""

    def __init__(self, items: Items, server_in: int | None, host_out: int | None) -> None:
        self.items = items
        self.gates = {"out": Gate(self, "client", server_in), "in": Gate(self, "server", host_out)}
        self.lock = threading.Lock()
        self.rules: tuple[dict[str, Any], ...] = ()
        self.faults: dict[str, Any] = {}  # replaced whole, never changed in place: the pumps read it unlocked
        self.held: dict[int, Held] = {}
        self.ids = itertools.count(1)
        self.asked: dict[tuple[str, Any], tuple[str, str]] = {}  # (direction, id) → (method, name)
        self.asked_lock = threading.Lock()
        self.server_label = ""
        self.version = 0
        self.changed = threading.Event()
        self.on_close: list[Any] = []

    def wanted(self) -> bool:
        return bool(self.rules or self.faults or self.held)

    def _open_gates(self) -> None:
        # Under each gate's lock: a pump closing its gate for want of rules must not undo this.
        for gate in self.gates.values():
            with gate.lock:
                gate.active = True

    def _bump(self) -> None:
        self.version += 1
        self.changed.set()

    # --- what a line is -------------------------------------------------------------------------

    def describe(self, direction: str, body: bytes) -> Described:
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            message = None
        facts = describe(direction, body, message)
        key = (OTHER[direction], facts.rpc_id) if isinstance(facts.rpc_id, int | str) else None
        with self.asked_lock:  # both pumps read and write it
            if facts.kind == "request" and key is not None:
                if len(self.asked) >= REMEMBERED:
                    self.asked.pop(next(iter(self.asked)))
                self.asked[(direction, facts.rpc_id)] = (facts.method, facts.name)
            elif facts.kind in ("result", "error") and key is not None:
                facts.method, facts.name = self.asked.pop(key, ("", ""))
        return facts

    # --- breakpoints ----------------------------------------------------------------------------

    def set_rules(self, rules: Any) -> None:
        if not isinstance(rules, list) or len(rules) > MAX_RULES:
            raise TrafficError(f"rules are a list of at most {MAX_RULES}")
        try:
            checked = tuple(checked_rule(rule) for rule in rules)
        except RuleError as exc:
            raise TrafficError(str(exc)) from None
        with self.lock:
            self.rules = checked
            if checked:
                self._open_gates()
            self._bump()

    def hold(
        self, gate: Gate, line: bytes, facts: Described, wall: float, mono: float, settle: Any = None
    ) -> Held:
        with self.lock:
            held = Held(next(self.ids), gate, line, facts, wall, mono, settle)
            self.held[held.id] = held
            with gate.lock:
                gate.pending += 1
            self._bump()
        return held

    def release(self, held_id: Any, action: str, by: Any, **how: Any) -> Change | None:
        """Decide a held message: forward, edit, drop, error, delay. The change (None for a delay)."""
        if action not in ("forward", "edit", "drop", "error", "delay"):
            raise TrafficError("the action is forward, edit, drop, error or delay")
        by = str(by or "someone")[:150]
        edited = _edited(how.get("raw")) if action == "edit" else b""
        ms = _delay_ms(how.get("ms")) if action == "delay" else 0
        with self.lock:
            held = self.held.get(held_id) if isinstance(held_id, int) else None
            if held is None:
                raise TrafficError("no such held message: another person may have decided it")
            if action == "error" and held.facts.kind != "request":
                raise TrafficError("only a request can be answered with an error")
            del self.held[held_id]
            self._bump()
        gate, waited = held.gate, time.monotonic() - held.mono
        after = f"after {waited:.1f} s"
        change = Change(gate.direction, seqs=None if action == "delay" else queue.SimpleQueue())
        if action == "forward":
            change.sent, change.sent_note = held.raw, f"held, forwarded by {by} {after}"
        elif action == "edit":
            change.sent, change.sent_note = edited, f"held, edited by {by} {after}; the original is kept"
            change.original, change.original_note = held.raw, f"held, edited by {by}: not forwarded as read"
        elif action == "drop":
            change.original, change.original_note = held.raw, f"held, dropped by {by} {after}"
        elif action == "error":
            change.original = held.raw
            change.original_note = f"held, answered with an error by {by} {after}: not forwarded"
            change.reply = _error(held.facts.rpc_id, how.get("code"), how.get("message"))
            change.reply_note = f"the tap's answer, for {by}"
        else:
            change.sent, change.sent_note = held.raw, f"held, delayed {ms} ms by {by}"
        if held.settle is not None:
            held.settle(action, change, ms)
            return change
        if action in ("forward", "edit"):
            assert change.sent is not None
            gate.forward(change.sent, held.wall, held.mono, change)
        elif action == "drop":
            gate.record(change, held.wall, held.mono)
        elif action == "error":
            assert change.reply is not None
            self.gates[OTHER[gate.direction]].answer(change.reply, change, held.wall, held.mono)
        else:
            timer = threading.Timer(ms / 1000, _forward_later, (gate, held, change))
            timer.daemon = True
            timer.start()
            return change  # the held count ends with the forward
        with gate.lock:
            gate.pending -= 1
        return change

    def withdraw(self, held_id: int) -> None:
        """A held message whose exchange ended before anyone decided (the host left): no card any more."""
        with self.lock:
            if self.held.pop(held_id, None) is not None:
                self._bump()

    # --- faults ---------------------------------------------------------------------------------

    def set_faults(self, faults: Any) -> None:
        checked = _checked_faults(faults)
        with self.lock:
            self.faults = checked
            if checked:
                self._open_gates()
            self._bump()

    def once(self, action: str, direction: str) -> None:
        """A one-shot fault: ``close`` the connection now, ``truncate`` or ``corrupt`` the next message."""
        if action == "close":
            self.closed(time.time(), time.monotonic())
            for close in self.on_close:
                close()
            return
        if action not in ("truncate", "corrupt") or direction not in self.gates:
            raise TrafficError("a one-shot fault is close, truncate or corrupt, with direction in or out")
        gate = self.gates[direction]
        with gate.lock:
            gate.once = action
            gate.active = True
        with self.lock:
            self._bump()

    def answered_by_fault(self, gate: Gate, line: bytes, facts: Described, wall: float, mono: float) -> bool:
        """A request of a method the faults answer with an error: its sender gets the error at once."""
        for entry in self.faults.get("errors", ()):
            if facts.kind == "request" and facts.method == entry["method"]:
                reply = _error(facts.rpc_id, entry["code"], entry["message"])
                what = f"answered {WHO[gate.direction]} {facts.method} with error {entry['code']}"
                change = Change(gate.direction, original=line)
                change.original_note = f"{what}: not forwarded (a fault)"
                change.fault = {"what": "error", "method": facts.method, "code": entry["code"]}
                change.fault_note = f"fault: {what}"
                change.reply, change.reply_note = reply, "the tap's answer (a fault)"
                self.gates[OTHER[gate.direction]].answer(reply, change, wall, mono)
                return True
        return False

    def closed(self, wall: float, mono: float) -> None:
        """Record the ``close`` fault (the forwarding calls it as it closes the pipes)."""
        change = Change("out", fault={"what": "close"})
        change.fault_note = "fault: closed the connection (the server's stdin and the host's stdout)"
        self.gates["out"].record(change, wall, mono)

    # --- what the inspector is shown ------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            held = [h.shown() for h in self.held.values()]
            return {
                "version": self.version,
                "rules": list(self.rules),
                "faults": self.faults,
                "held": held,
                "once": {d: g.once for d, g in self.gates.items() if g.once},
            }


def _forward_later(gate: Gate, held: Held, change: Change) -> None:
    gate.forward(held.raw, held.wall, held.mono, change)
    with gate.lock:
        gate.pending -= 1


def _edited(raw: Any) -> bytes:
    """An edited message, checked as JSON; one line, as stdio frames it."""
    if not isinstance(raw, str):
        raise TrafficError("the edited message is text")
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TrafficError(f"the edited message is not JSON: {exc}") from None
    text = raw.strip()
    if "\n" in text or "\r" in text:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode() + b"\n"


def _delay_ms(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_DELAY_MS:
        raise TrafficError(f"the delay is whole milliseconds from 0 to {MAX_DELAY_MS}")
    return value


def _error(rpc_id: Any, code: Any, message: Any) -> bytes:
    code = code if isinstance(code, int) and not isinstance(code, bool) else -32000
    text = message if isinstance(message, str) and message else "Answered by the MCP inspector's tap"
    answer = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": text[:1000]}}
    return json.dumps(answer, ensure_ascii=False).encode() + b"\n"


def _checked_faults(faults: Any) -> dict[str, Any]:
    """Standing faults as the control channel received them, checked; empty parts left out."""
    if not isinstance(faults, dict):
        raise TrafficError("faults are a JSON object")
    checked: dict[str, Any] = {}
    latency = {}
    for direction, entry in (faults.get("latency") or {}).items():
        if direction not in OTHER or not isinstance(entry, dict):
            raise TrafficError("latency is given per direction (in, out) as {ms, jitter}")
        ms, jitter = entry.get("ms", 0), entry.get("jitter", 0)
        if not all(isinstance(v, int | float) and 0 <= v <= MAX_DELAY_MS for v in (ms, jitter)):
            raise TrafficError(f"latency and jitter are milliseconds from 0 to {MAX_DELAY_MS}")
        if ms or jitter:
            latency[direction] = {"ms": ms, "jitter": jitter}
    if latency:
        checked["latency"] = latency
    drop = {}
    for direction, share in (faults.get("drop") or {}).items():
        if direction not in OTHER or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise TrafficError("the share of notifications dropped is from 0 to 1, per direction")
        if share:
            drop[direction] = share
    if drop:
        checked["drop"] = drop
    errors = []
    for entry in faults.get("errors") or []:
        method = entry.get("method") if isinstance(entry, dict) else None
        if not isinstance(method, str) or not method or len(method) > 200:
            raise TrafficError("an error fault names the method it answers")
        code, message = entry.get("code", -32000), entry.get("message", "")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            raise TrafficError("an error fault's code is a whole number and its message text")
        errors.append({"method": method, "code": code, "message": message[:1000]})
    if errors:
        checked["errors"] = errors[:20]
    return checked
