"""Open a recording: a session's JSON Lines (the web export, or the CLI's ``--record``) as a session.

The frames keep their numbers, bytes, verdicts and notes; the session's facts (protocol, server info,
capabilities, instructions, lifecycle phases) are read back from the frames, so a teammate who was
sent the file sees what the recorder saw, in the same pages: timeline, filters, frame details,
Conformance. The import is all or nothing, and a bad line is named with its number.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from sessions.engine import Frame, Verdict
from sessions.models import McpSession, TimelineFrame
from sessions.runtime import frame_row

KINDS = frozenset({"message", "stderr", "http", "state", "exit"})
DIRECTIONS = frozenset({"in", "out", "local"})
SEVERITIES = frozenset({"error", "warning", "info"})
MAX_FRAMES = 1_000_000
MAX_BYTES = 1 << 30  # 1 GiB of JSON Lines
BATCH = 1000


class RecordingError(ValueError):
    """The file is not a recording this inspector can open."""


def _frame(record: Any, line: int) -> Frame:
    if not isinstance(record, dict):
        raise RecordingError(f"line {line}: expected a JSON object (a frame)")
    kind, direction, seq = record.get("kind"), record.get("direction"), record.get("seq")
    if kind not in KINDS or direction not in DIRECTIONS or not isinstance(seq, int) or seq < 1:
        raise RecordingError(f"line {line}: not a frame (needs seq, kind and direction)")
    raw = record.get("raw") or ""
    if not isinstance(raw, str):
        raise RecordingError(f"line {line}: raw must be text")
    encoding = "latin-1" if record.get("raw_encoding") == "latin-1" else "utf-8"
    verdicts = [
        Verdict(str(v.get("code", "?")), v["severity"], str(v.get("message", "")))
        for v in record.get("verdicts") or []
        if isinstance(v, dict) and v.get("severity") in SEVERITIES
    ]
    rpc_id = record.get("rpc_id")
    pair = record.get("pair_seq")
    latency = record.get("latency_ms")
    return Frame(
        kind,
        direction,
        raw.encode(encoding),
        transport=record["transport"] if isinstance(record.get("transport"), dict) else {},
        wall=float(record["wall"]) if isinstance(record.get("wall"), int | float) else 0.0,
        mono=float(record["mono"]) if isinstance(record.get("mono"), int | float) else 0.0,
        seq=seq,
        parse_error=str(record["parse_error"]) if record.get("parse_error") else None,
        rpc_kind=str(record["rpc_kind"]) if record.get("rpc_kind") else None,
        method=str(record["method"]) if record.get("method") else None,
        rpc_id=rpc_id if isinstance(rpc_id, int | str) and not isinstance(rpc_id, bool) else None,
        verdicts=verdicts,
        pair_seq=pair if isinstance(pair, int) else None,
        latency_ms=float(latency) if isinstance(latency, int | float) else None,
        note=str(record["note"]) if record.get("note") else None,
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _message(frame: Frame) -> dict[str, Any]:
    try:
        message = json.loads(frame.raw)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


class _Facts:
    """What the session row says, read back from its frames."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {"phases": []}
        self.transport_name = ""

    def see(self, frame: Frame) -> None:
        if frame.kind == "state":
            state = frame.transport.get("state")
            if state in McpSession.PHASES:
                self.fields["phases"].append(
                    {"state": state, "note": frame.note or "", "wall": frame.wall, "seq": frame.seq}
                )
            if frame.note and frame.note.startswith("opening ") and frame.note.endswith(" transport"):
                self.fields["transport_name"] = frame.note[len("opening ") : -len(" transport")]
        elif frame.kind == "exit":
            stdio = frame.transport.get("stdio")
            code = stdio.get("returncode") if isinstance(stdio, dict) else None
            if isinstance(code, int):
                self.fields["exit_code"] = code
        if frame.kind != "message" or frame.method not in ("initialize", "server/discover"):
            return
        message = _message(frame)
        params = _object(message.get("params"))
        result = message.get("result") if isinstance(message.get("result"), dict) else None
        if frame.direction == "out" and frame.method == "initialize":
            caps = params.get("capabilities")
            self.fields["client_capabilities"] = caps if isinstance(caps, dict) else {}
        elif frame.direction == "out":
            meta = _object(params.get("_meta"))
            caps = meta.get("io.modelcontextprotocol/clientCapabilities")
            if isinstance(caps, dict):
                self.fields["client_capabilities"] = caps
            version = meta.get("io.modelcontextprotocol/protocolVersion")
            if isinstance(version, str):
                self.fields.setdefault("protocol_version", version)
        elif result is not None:
            stateless = frame.method == "server/discover"
            meta = _object(result.get("_meta"))
            info = meta.get("io.modelcontextprotocol/serverInfo") if stateless else result.get("serverInfo")
            version = result.get("protocolVersion")
            caps, instructions = result.get("capabilities"), result.get("instructions")
            self.fields.update(
                mode="stateless" if stateless else "handshake",
                server_info=info if isinstance(info, dict) else {},
                server_capabilities=caps if isinstance(caps, dict) else {},
                instructions=instructions if isinstance(instructions, str) else "",
            )
            if isinstance(version, str):
                self.fields["protocol_version"] = version


def import_recording(owner: User, name: str, lines: Iterable[bytes | str]) -> McpSession:
    """Store the frames of a JSON Lines recording as a new, closed session of ``owner``."""
    facts = _Facts()
    with transaction.atomic():
        session = McpSession.objects.create(
            owner=owner,
            name=name[:200] or "recording",
            config={"imported_from": name},
            status=McpSession.Status.CLOSED,
        )
        batch: list[TimelineFrame] = []
        seen: set[int] = set()
        last = 0
        for number, line in enumerate(lines, start=1):
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise RecordingError(f"line {number}: not JSON ({exc.msg})") from None
            frame = _frame(record, number)
            if frame.seq in seen:
                raise RecordingError(f"line {number}: frame {frame.seq} appears twice")
            seen.add(frame.seq)
            if len(seen) > MAX_FRAMES:
                raise RecordingError(f"more than {MAX_FRAMES:,} frames")
            facts.see(frame)
            last = max(last, frame.seq)
            batch.append(TimelineFrame(session=session, **frame_row(frame, 0)))
            if len(batch) >= BATCH:
                TimelineFrame.objects.bulk_create(batch)
                batch = []
        if not seen:
            raise RecordingError("the file holds no frames")
        TimelineFrame.objects.bulk_create(batch)
        for field, value in facts.fields.items():
            setattr(session, field, value)
        session.last_seq = last
        session.ended = timezone.now()
        session.status_note = f"opened from the recording {name} ({len(seen):,} frames)"
        session.save()
    return session
