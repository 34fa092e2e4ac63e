"""Open a recording: a session's JSON Lines (the web export, or the CLI's ``--record``) as a session.

The frames keep their numbers, bytes, verdicts and notes; the session's facts (protocol, server info,
capabilities, instructions, lifecycle phases) are read back from the frames, so a teammate who was
sent the file sees what the recorder saw, in the same pages: timeline, filters, frame details,
Conformance.

A file is read a line at a time, each line at most ``MAX_LINE`` bytes, so memory stays bounded
whatever its size. A small file is opened at once; a bigger one is checked at its head, then
imported by a thread of its own in short transactions (live sessions' recorders write between
them), with its progress on the session's row. The import is all or nothing: a bad line, named
with its number, removes what was stored and marks the session failed with the reason. The same
file opened again by the same person opens the session it already made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import IO, Any

from django.core.files.uploadedfile import UploadedFile
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from sessions.engine import Frame
from sessions.frames import RecordError, frame_from_record, frame_row, message_of, storable
from sessions.models import McpSession, TimelineFrame

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_BYTES",
    "MAX_LINE",
    "RecordingError",
    "Upload",
    "import_progress",
    "import_recording",
    "open_upload",
    "read_frames",
]

MAX_FRAMES = 1_000_000
MAX_BYTES = 1 << 30  # 1 GiB of JSON Lines
# One frame's line. The engine keeps at most its maximum message size of a message; a line holds
# those bytes as JSON text, which escapes can make several times longer.
MAX_LINE = 64 << 20
INLINE_BYTES = 1 << 20  # a file up to this size is opened in the request; its head, for a bigger one
BATCH = 500  # frames a transaction: short enough that a live session's recorder waits only briefly
MAX_PHASES = 1000
STALE_AFTER = 120.0  # seconds without progress: the process that imported it has stopped


class RecordingError(ValueError):
    """The file is not a recording this inspector can open."""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class _Facts:
    """What the session row says, read back from its frames."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {"phases": []}

    def see(self, frame: Frame) -> None:
        if frame.kind == "state":
            state = frame.transport.get("state")
            if state in McpSession.PHASES and len(self.fields["phases"]) < MAX_PHASES:
                self.fields["phases"].append(
                    {"state": state, "note": frame.note or "", "wall": frame.wall, "seq": frame.seq}
                )
            if frame.note and frame.note.startswith("opening ") and frame.note.endswith(" transport"):
                self.fields["transport_name"] = frame.note[len("opening ") : -len(" transport")][:40]
        elif frame.kind == "exit":
            stdio = frame.transport.get("stdio")
            code = stdio.get("returncode") if isinstance(stdio, dict) else None
            if isinstance(code, int) and -(2**31) <= code < 2**31:
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
                self.fields.setdefault("protocol_version", version[:20])
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
                self.fields["protocol_version"] = version[:20]


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:40]} is not a finite number")
    return number


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _record(line: bytes, number: int) -> Any:
    """One line as JSON: strict (no NaN or Infinity), and any nesting is an answer, not a crash."""
    try:
        return json.loads(line.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite)
    except UnicodeDecodeError:
        raise RecordingError(f"line {number}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RecordingError(f"line {number}: not JSON ({exc.msg})") from None
    except ValueError as exc:
        raise RecordingError(f"line {number}: not a recording's JSON ({exc})") from None
    except RecursionError:
        raise RecordingError(f"line {number}: JSON nested too deeply") from None


def read_frames(file: IO[bytes], *, stop_after: int | None = None) -> Iterator[tuple[int, Frame]]:
    """Yield each frame of a recording with the bytes read so far (up to about ``stop_after``).

    ``RecordingError`` names the first bad line. A line is read with a bound, so a file that is one
    endless line costs ``MAX_LINE`` bytes of memory and is refused as soon as they are read.
    """
    number = offset = 0
    while stop_after is None or offset < stop_after:
        line = file.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        offset += len(line)
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            raise RecordingError(
                f"line {number} is longer than {MAX_LINE >> 20} MiB: one frame cannot be that big"
            )
        if not line.strip():
            continue
        try:
            yield offset, frame_from_record(_record(line, number), number)
        except RecordError as exc:
            raise RecordingError(str(exc)) from None


class Upload:
    """An uploaded recording kept in a file of our own (the request's copy goes when it ends)."""

    def __init__(self, path: str, size: int, sha256: str) -> None:
        self.path, self.size, self.sha256 = path, size, sha256

    @classmethod
    def keep(cls, upload: UploadedFile) -> Upload:
        """Copy the upload to a file of our own, hashing it on the way (one pass, 1 MiB at a time)."""
        digest, size = hashlib.sha256(), 0
        fd, path = tempfile.mkstemp(prefix="mcp-recording-", suffix=".jsonl")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in upload.chunks(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
        except BaseException:
            os.unlink(path)
            raise
        return cls(path, size, digest.hexdigest())

    def check_head(self) -> None:
        """Read the head of the file as the import will: a file that is no recording is refused now."""
        seen: set[int] = set()
        with open(self.path, "rb") as file:
            for _, frame in read_frames(file, stop_after=INLINE_BYTES):
                if frame.seq in seen:
                    raise RecordingError(f"frame {frame.seq} appears twice")
                seen.add(frame.seq)
        if not seen:
            raise RecordingError("the file holds no frames")

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _stale(session: McpSession) -> bool:
    at = _object(session.import_progress).get("at")
    return not isinstance(at, int | float) or time.time() - at > STALE_AFTER


def import_progress(session: McpSession) -> dict[str, Any]:
    """How an import stands: frames stored, percent of the file read, and whether it has stopped."""
    progress = _object(session.import_progress)
    total, done = progress.get("total") or 0, progress.get("bytes") or 0
    return {
        "frames": progress.get("frames") or 0,
        "percent": min(100, int(100 * done / total)) if total else 0,
        "stalled": session.status == McpSession.Status.IMPORTING and _stale(session),
    }


def open_upload(team_id: int, owner_id: int | None, name: str, upload: Upload) -> McpSession:
    """Open a kept upload as a session of the team: the one this same file already made, or a new one.

    A small file is imported at once (``RecordingError`` refuses it, nothing stored); a bigger one
    is checked at its head (``RecordingError`` again) and imported by a thread, the new session
    showing its progress. The upload's file belongs to the import from here on.
    """
    try:
        earlier = _earlier(team_id, upload.sha256)
        if earlier is not None:
            upload.discard()
            return earlier
        if upload.size > INLINE_BYTES:
            upload.check_head()
    except BaseException:
        upload.discard()
        raise
    session = _new_session(team_id, owner_id, name, upload.sha256, upload.size)
    if upload.size > INLINE_BYTES:
        threading.Thread(
            target=_import_in_background, args=(session, upload), name=f"import-{session.pk}", daemon=True
        ).start()
        return session
    try:
        with open(upload.path, "rb") as file:
            _import(session, file, upload.size)
    except RecordingError:
        session.delete()
        raise
    finally:
        upload.discard()
    return session


def import_recording(team_id: int, owner_id: int | None, name: str, file: IO[bytes]) -> McpSession:
    """Store the frames of a JSON Lines file as a new, closed session of the team, in this thread."""
    session = _new_session(team_id, owner_id, name, "", 0)
    try:
        _import(session, file, 0)
    except RecordingError:
        session.delete()
        raise
    return session


def _new_session(team_id: int, owner_id: int | None, name: str, sha256: str, size: int) -> McpSession:
    name = storable(name)  # a file's name is text a browser sent: NUL included
    return McpSession.objects.create(
        team_id=team_id,
        owner_id=owner_id,
        name=name[:200] or "recording",
        config={"imported_from": name[:1000]},
        status=McpSession.Status.IMPORTING,
        recording_sha256=sha256,
        import_progress={"frames": 0, "bytes": 0, "total": size, "at": time.time()},
    )


def _earlier(team_id: int, sha256: str) -> McpSession | None:
    """The session this file already made for the team; failed or stopped imports are cleared away."""
    found = None
    for session in McpSession.objects.filter(team_id=team_id, recording_sha256=sha256).order_by("-created"):
        if session.status == McpSession.Status.FAILED or (
            session.status == McpSession.Status.IMPORTING and _stale(session)
        ):
            _delete_frames(session.pk)
            session.delete()
        elif found is None:
            found = session
    return found


def _import_in_background(session: McpSession, upload: Upload) -> None:
    """The import thread: its own database connection, closed at the end; the reason if it fails."""
    close_old_connections()
    try:
        with open(upload.path, "rb") as file:
            _import(session, file, upload.size)
    except RecordingError as exc:
        _fail(session, f"cannot open {session.config.get('imported_from')}: {exc}")
    except Exception as exc:  # a database error, say: the page says so rather than import for ever
        logger.exception("importing the recording of session %s failed", session.pk)
        _fail(session, f"the import failed: {type(exc).__name__}: {exc}"[:2000])
    finally:
        upload.discard()
        connections.close_all()


def _fail(session: McpSession, reason: str) -> None:
    _delete_frames(session.pk)
    McpSession.objects.filter(pk=session.pk).update(
        status=McpSession.Status.FAILED, status_note=reason, ended=timezone.now(), import_progress={}
    )


def _delete_frames(session_pk: int) -> None:
    """Delete a session's frames a batch at a time (one long DELETE would hold up live recorders)."""
    frames = TimelineFrame.objects.filter(session_id=session_pk)
    while pks := list(frames.values_list("pk", flat=True)[: BATCH * 4]):
        TimelineFrame.objects.filter(pk__in=pks).delete()


def _import(session: McpSession, file: IO[bytes], total: int) -> None:
    """Store every frame of the file, a batch a transaction, then the session's facts.

    ``RecordingError`` (a bad line, a repeated frame) leaves no frame behind. A session deleted
    while it imports stops the import quietly.
    """
    facts, count, last, offset = _Facts(), 0, 0, 0
    batch: list[dict[str, Any]] = []
    try:
        for offset, frame in read_frames(file):
            facts.see(frame)
            count += 1
            if count > MAX_FRAMES:
                raise RecordingError(f"more than {MAX_FRAMES:,} frames")
            last = max(last, frame.seq)
            batch.append(frame_row(frame, 0))
            if len(batch) >= BATCH:
                if not _store(session, batch, count, offset, total):
                    return
                batch = []
        if not count:
            raise RecordingError("the file holds no frames")
        if not _store(session, batch, count, offset, total):
            return
    except RecordingError:
        _delete_frames(session.pk)
        raise
    source = session.config.get("imported_from")
    McpSession.objects.filter(pk=session.pk).update(
        **storable(facts.fields),
        status=McpSession.Status.CLOSED,
        last_seq=last,
        ended=timezone.now(),
        status_note=f"opened from the recording {source} ({count:,} frames)",
        import_progress={},
    )
    session.refresh_from_db()


def _store(session: McpSession, batch: list[dict[str, Any]], count: int, offset: int, total: int) -> bool:
    """Store a batch and the progress in one short transaction; False when the session is gone."""
    seqs = Counter(row["seq"] for row in batch)
    progress = {"frames": count, "bytes": offset, "total": total, "at": time.time()}
    with transaction.atomic():
        if not McpSession.objects.filter(pk=session.pk).update(import_progress=progress):
            return False
        repeated = [seq for seq, times in seqs.items() if times > 1] or list(
            TimelineFrame.objects.filter(session=session, seq__in=list(seqs)).values_list("seq", flat=True)[
                :1
            ]
        )
        if repeated:
            raise RecordingError(f"frame {repeated[0]} appears twice")
        TimelineFrame.insert_rows(session.pk, batch)
    return True
