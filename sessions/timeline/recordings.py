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

from sessions.engine import Frame
from sessions.frames import RecordError, frame_from_record, frame_row, message_of
from sessions.models import McpSession, TimelineFrame

MAX_FRAMES = 1_000_000
MAX_BYTES = 1 << 30  # 1 GiB of JSON Lines
BATCH = 1000


class RecordingError(ValueError):
    """The file is not a recording this inspector can open."""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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
        message = frame.message if isinstance(frame.message, dict) else message_of(frame.raw)
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
            try:
                frame = frame_from_record(record, number)
            except RecordError as exc:
                raise RecordingError(str(exc)) from None
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
