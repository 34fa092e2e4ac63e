"""What the engine records: frames, verdicts and the other events of a connection."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "HEAD_BYTES",
    "Direction",
    "Event",
    "Frame",
    "FrameKind",
    "PendingRequest",
    "PendingResolved",
    "Progress",
    "Severity",
    "TERMINAL",
    "Task",
    "TaskChanged",
    "Verdict",
    "head_of",
    "too_large",
]

Direction = Literal["out", "in", "local"]
FrameKind = Literal["message", "stderr", "http", "state", "exit"]
Severity = Literal["error", "warning", "info"]

HEAD_BYTES = 4096
"""How much of an oversized message is kept (see ``too_large``)."""


@dataclass(slots=True, frozen=True)
class Verdict:
    """One conformance finding about a frame: a rule code, how bad it is, and why."""

    code: str
    severity: Severity
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(slots=True)
class Frame:
    """One thing seen on the wire (or about the connection), recorded before it is interpreted.

    ``raw`` holds the exact bytes, whatever they are; ``message`` the parsed JSON when parsing
    succeeded. ``seq`` orders every frame of a connection.
    """

    kind: FrameKind
    direction: Direction
    raw: bytes = b""
    transport: dict[str, Any] = field(default_factory=dict)
    wall: float = field(default_factory=time.time)
    mono: float = field(default_factory=time.monotonic)
    seq: int = 0
    message: Any = None
    parse_error: str | None = None
    rpc_kind: str | None = None  # request, notification, result, error, batch, invalid
    method: str | None = None
    rpc_id: int | str | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    pair_seq: int | None = None
    latency_ms: float | None = None
    note: str | None = None

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def text(self) -> str:
        """Return the raw bytes as text, with invalid UTF-8 shown as replacement characters."""
        return self.raw.decode("utf-8", errors="replace")

    def flag(self, code: str, severity: Severity, message: str) -> None:
        self.verdicts.append(Verdict(code, severity, message))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record of this frame; bytes that are not UTF-8 go as latin-1 with a flag."""
        try:
            raw_text, encoding = self.raw.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            raw_text, encoding = self.raw.decode("latin-1"), "latin-1"
        return {
            "seq": self.seq,
            "kind": self.kind,
            "direction": self.direction,
            "wall": self.wall,
            "mono": self.mono,
            "size": len(self.raw),
            "raw": raw_text,
            "raw_encoding": encoding,
            "transport": self.transport,
            "parse_error": self.parse_error,
            "rpc_kind": self.rpc_kind,
            "method": self.method,
            "rpc_id": self.rpc_id,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "pair_seq": self.pair_seq,
            "latency_ms": self.latency_ms,
            "note": self.note,
        }


def head_of(parts: list[bytes], size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of the concatenated ``parts``, without joining them all."""
    head = b""
    for part in parts:
        head += part[: size - len(head)]
        if len(head) >= size:
            break
    return head


def too_large(head: bytes, limit: int, **transport: Any) -> Frame:
    """The frame for an incoming message over ``limit`` bytes: its first bytes, flagged, not parsed."""
    frame = Frame(
        "message",
        "in",
        head[:HEAD_BYTES],
        transport=transport,
        rpc_kind="invalid",
        parse_error=f"larger than {limit} bytes: not parsed",
    )
    frame.flag(
        "message-too-large",
        "error",
        f"the message is larger than the {limit}-byte limit (max_message_bytes): "
        f"its first {len(frame.raw)} bytes are kept and the rest was skipped",
    )
    return frame


@dataclass(slots=True)
class Progress:
    """A progress notification matched to the request it reports on."""

    request_id: int | str
    progress: float
    total: float | None
    message: str | None
    frame_seq: int


@dataclass(slots=True)
class PendingRequest:
    """A server→client request waiting for an answer (often from a person)."""

    key: str
    request_id: int | str
    method: str
    params: dict[str, Any]
    frame_seq: int


@dataclass(slots=True)
class PendingResolved:
    """A pending server→client request ended: answered, rejected, or withdrawn by the server."""

    key: str
    outcome: Literal["answered", "rejected", "withdrawn", "failed"]
    detail: str = ""


TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""Task statuses that never change (2025-11-25 tasks)."""


@dataclass(slots=True)
class Task:
    """What the session knows of one task: its last reported state, what created it, its result."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl: int | None = None
    poll_interval: int | None = None
    method: str | None = None
    """The task-augmented request that created it (``tools/call`` …), when this session sent it."""
    name: str | None = None
    """The tool's name, for a ``tools/call`` task."""
    request_id: int | str | None = None
    result: dict[str, Any] | None = None
    """What ``tasks/result`` returned (``None`` until then)."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error ``tasks/result`` returned instead."""
    frame_seq: int = 0
    """The frame that last changed it."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(slots=True)
class TaskChanged:
    """A task was first seen, changed status (or status message), or its result arrived."""

    task: Task
    """The task as it is now (a copy)."""
    previous: str | None
    """Its status before (``None``: first seen)."""
    frame_seq: int
    """The frame that reported it."""
    reason: Literal["created", "status", "result"] = "status"


Event = Frame | Progress | PendingRequest | PendingResolved | TaskChanged
