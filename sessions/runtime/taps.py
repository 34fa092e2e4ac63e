"""Tap sessions: the frames ``mcp-inspector tap`` leaves in the data folder, as live sessions.

A tap appends every frame it forwards to ``<data folder>/taps/<run>.jsonl`` (the CLI's ``--record``
format), whether or not the inspector runs. The embedded runtime watches that folder (a scan every
``POLL`` seconds: a directory listing and a stat per file) and takes each new complete line as a
frame of the run's session: recorded by a ``Recorder`` like any live session's frames, so the open
tabs get them through the same pipeline. The session is made at the run's first frame, in the local
person's team, named as the tap was; its facts (protocol, capabilities, lifecycle phases) come from
its frames; it ends at the tap's exit frame, or when the tap is gone without one. A spool is removed
once every frame of it is stored.

Only the user who runs the inspector can write there: the folder is theirs alone (0700) and a file
that is not theirs, or that others may write, or a link, is refused. A run is taken up again after a
restart: frames already stored (by seq) are skipped, so none is lost and none is stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from channels.layers import BaseChannelLayer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions.engine import Frame, ServerProcess
from sessions.frames import RecordError, frame_from_record, frame_row, message_of, storable
from sessions.models import McpSession
from sessions.runtime import messages as m
from sessions.runtime import store, tap_control
from sessions.runtime.recorder import Recorder
from sessions.teams.access import personal_team
from sessions.teams.logins import local_user

__all__ = ["POLL", "TAP_TRANSPORT", "TapIngester", "spool_folder"]

log = logging.getLogger(__name__)

POLL = 0.05
"""Seconds between looks at the spool folder: a frame a tap wrote is in an open tab well within 0.25 s."""
READ_AT_ONCE = 1 << 20
"""Bytes of one spool read in one turn of the event loop; a long backlog is taken in turns."""
WATCH_AGAIN = 0.5
"""Seconds before the control channel of a live run is tried again (the tap makes it as it starts)."""
GONE_CHECK = 2.0
"""Seconds between checks that a quiet run's tap still lives."""
TAP_TRANSPORT = "tap"
STATUS_OF = {
    "initializing": McpSession.Status.INITIALIZING,
    "ready": McpSession.Status.READY,
    "closed": McpSession.Status.CLOSED,
    "failed": McpSession.Status.FAILED,
}


def spool_folder() -> Path:
    """Where taps leave their frames (``inspector.tap._spool.spool_dir`` names the same folder)."""
    return Path(settings.DATA_DIR) / "taps"


@dataclass
class _Facts:
    """What the session's row says, read from its frames as they come (from the first, after a restart)."""

    fields: dict[str, Any] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)
    ended: bool = False

    def see(self, frame: Frame) -> None:
        if frame.kind == "state":
            state = frame.transport.get("state")
            if state in McpSession.PHASES:
                self.phases.append(
                    {"state": state, "note": frame.note or "", "wall": frame.wall, "seq": frame.seq}
                )
                self.fields["status_note"] = frame.note or state
            if state in STATUS_OF:
                self.fields["status"] = STATUS_OF[state]
            self.ended = self.ended or state in ("closed", "failed")
        elif frame.kind == "exit":
            code = frame.transport.get("stdio", {}).get("returncode")
            if isinstance(code, int) and -(2**31) <= code < 2**31:
                self.fields["exit_code"] = code
        elif frame.kind == "message" and frame.method == "initialize":
            message = message_of(frame.raw)
            message = message if isinstance(message, dict) else {}
            if frame.direction == "out":
                params = message.get("params")
                caps = params.get("capabilities") if isinstance(params, dict) else None
                self.fields["client_capabilities"] = caps if isinstance(caps, dict) else {}
            elif isinstance(message.get("result"), dict):
                result = message["result"]
                version, info = result.get("protocolVersion"), result.get("serverInfo")
                caps, instructions = result.get("capabilities"), result.get("instructions")
                self.fields.update(
                    mode="handshake",
                    protocol_version=str(version)[:20] if version is not None else "",
                    server_info=info if isinstance(info, dict) else {},
                    server_capabilities=caps if isinstance(caps, dict) else {},
                    instructions=instructions if isinstance(instructions, str) else "",
                )


class _Run:
    """One tap run's spool, and the session its frames go to."""

    def __init__(self, path: Path, layer: BaseChannelLayer) -> None:
        self.path = path
        self.layer = layer
        self.offset = 0
        self.line = 0
        self.pk: int | None = None
        self.group = ""
        self.stored = 0  # the last seq the session already had when this process took the run up
        self.recorder: Recorder | None = None
        self.facts = _Facts()
        self.written: dict[str, Any] = {}  # the row's fields as last written
        self.phases_written = 0
        self.revived = False  # a session marked lost while the inspector was away lives again
        self.tap: dict[str, Any] = {}
        named = tap_control.RUN.match(path.name)
        # The run whose socket takes the tap's commands: the spool's name says, its first frame may refine.
        self.control = named.group(0) if named else ""
        self.quiet_since = time.monotonic()
        self.done = False
        self.watcher: asyncio.Task[None] | None = None

    async def pump(self) -> None:
        """Take what the tap appended since last time (whole lines only); end the run at its end."""
        data = self._read()
        if data:
            self.quiet_since = time.monotonic()
            await self._take(data)
        if self.pk is not None and self.facts.ended:
            await self._end()
        elif not data and self._tap_gone():
            if self.pk is None:
                self._discard()
            else:
                await self._end()

    def _read(self) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return b""
        try:
            info = os.fstat(fd)
            if not _private(info):
                log.warning("tap spool %s is not the inspector user's own (0600): ignored", self.path)
                self.done = True
                return b""
            data = os.pread(fd, READ_AT_ONCE, self.offset)
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1  # a line the tap is still writing waits for its end
        self.offset += end
        return data[:end]

    async def _take(self, data: bytes) -> None:
        for line in data.splitlines():
            self.line += 1
            if not line.strip():
                continue
            try:
                frame = frame_from_record(json.loads(line), self.line)
            except (ValueError, RecordError) as exc:
                log.warning(
                    "tap spool %s, line %d: not a frame (%s); skipped", self.path.name, self.line, exc
                )
                continue
            if self.pk is None and not await self._open(frame):
                return
            self.facts.see(frame)
            if frame.seq > self.stored and self.recorder is not None:
                self.recorder.add(frame_row(frame, 0))
        await self._write_facts()

    async def _open(self, first: Frame) -> bool:
        """The run's first frame: find its session (a restart) or make it."""
        tap = first.transport.get("tap")
        self.tap = tap if isinstance(tap, dict) else {}
        stdio = first.transport.get("stdio")
        stdio = stdio if isinstance(stdio, dict) else {}
        run = self.path.name.removesuffix(".jsonl")
        control = str(self.tap.get("control") or run)
        control = control if tap_control.RUN.fullmatch(control) and run.startswith(control) else run
        details = {
            "run": run,
            # A host session after an HTTP tap's first is a run of its own, commanded by the tap's socket.
            "control": control,
            "name": str(self.tap.get("name") or stdio.get("command") or "tap"),
            "command": str(stdio.get("command") or ""),
            "args": [str(a) for a in stdio.get("args") or []][:200],
            "cwd": str(stdio.get("cwd") or ""),
        }
        self.control = control
        self.pk, self.group, self.stored = await _session_for(details, first.wall)
        self.recorder = Recorder(self.pk, self.group, self.layer)
        self.recorder.start()
        self.watcher = asyncio.get_running_loop().create_task(self._watch(control), name=f"mcp-tap-{run}")
        return True

    async def _watch(self, run: str) -> None:
        """Tell the session's tabs what the tap holds and which rules and faults it has, as they change."""
        told = False

        async def tell(state: dict[str, Any]) -> None:
            nonlocal told
            told = True
            await self._tell(m.TapChanged(state))

        while not self.done:
            with contextlib.suppress(tap_control.TapUnreachable):
                await tap_control.watch(run, tell)
            if told:  # nothing is held by a tap that does not answer
                told = False
                await self._tell(m.TapChanged({}))
            await asyncio.sleep(WATCH_AGAIN)

    async def _write_facts(self) -> None:
        """Write what changed in the row (status, facts, new phases), and tell the open tabs."""
        if self.pk is None:
            return
        fields = {k: v for k, v in self.facts.fields.items() if self.written.get(k) != v}
        if self.facts.ended:
            fields.pop("status", None)  # written once every frame is stored (``_end``)
        phases = self.facts.phases[self.phases_written :]
        if not self.revived and not self.facts.ended:
            fields["ended"], self.revived = None, True
        if not fields and not phases:
            return
        if "status" in fields and fields["status"] not in McpSession.LIVE:
            fields.pop("status")
        await store.append_phases(self.pk, storable(phases), **storable(fields))
        self.written.update(fields)
        self.phases_written = len(self.facts.phases)
        await self._tell(m.StateChanged(str(fields.get("status", "")), str(fields.get("status_note", ""))))

    async def _end(self) -> None:
        """Every frame is in: the session ends as the tap said (or as lost, when the tap died first)."""
        assert self.pk is not None and self.recorder is not None
        self._stop_watching()
        await self.recorder.close()
        if self.facts.ended:
            status = self.facts.fields.get("status", McpSession.Status.CLOSED)
            note = self.facts.fields.get("status_note", "")
        else:
            status, note = McpSession.Status.LOST, "the tap stopped before its server's exit was recorded"
            _unlink(tap_control.socket_path(self.control))  # a dead tap's socket, which nobody answers
        await self._write_facts()
        await store.update_session(self.pk, status=status, status_note=note, ended=timezone.now())
        await self._tell(m.StateChanged(str(status), str(note)))
        await self._tell(m.TapChanged({}))
        _unlink(self.path)
        self.done = True

    def _tap_gone(self) -> bool:
        """Whether the tap that writes this spool is dead, checked every ``GONE_CHECK`` of quiet: the
        process its first frame names, or before that frame (a tap writes it once it has loaded the
        engine) the pid in the spool's name, ``<ms>-<pid>-<hex>``."""
        if time.monotonic() - self.quiet_since < GONE_CHECK:
            return False
        self.quiet_since = time.monotonic()
        if self.pk is None:
            return bool(self.control) and _no_such_process(int(self.control.split("-")[1]))
        try:
            pid, started, host = int(self.tap["pid"]), int(self.tap["started"]), str(self.tap["host"])
        except (KeyError, TypeError, ValueError):
            return False
        now = ServerProcess.of(pid, "")
        return now.host == host and now.started != started

    def _discard(self) -> None:
        """The tap died before its first whole frame: there is no session to make, and its files go."""
        log.warning("tap spool %s: its tap ended before writing a frame; removed", self.path.name)
        _unlink(self.path)
        if self.control:
            _unlink(tap_control.socket_path(self.control))
        self.done = True

    async def _tell(self, event: m.Event) -> None:
        with contextlib.suppress(Exception):
            await self.layer.group_send(self.group, m.encode_event(event))

    def _stop_watching(self) -> None:
        if self.watcher is not None:
            self.watcher.cancel()
            self.watcher = None

    async def close(self) -> None:
        """The inspector stops: what was read is stored; the spool stays for the next start."""
        self._stop_watching()
        if self.recorder is not None:
            await self.recorder.close()


def _private(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


@store.in_db_thread
def _session_for(details: dict[str, Any], started: float) -> tuple[int, str, int]:
    """The session of a tap run: the one made before a restart, or a new one in the local person's team."""
    since = timezone.now() - timedelta(seconds=max(0.0, time.time() - started) + 60)
    for session in McpSession.objects.filter(transport_name=TAP_TRANSPORT, created__gte=since):
        tap = session.config.get("tap") if isinstance(session.config, dict) else None
        if isinstance(tap, dict) and tap.get("run") == details["run"]:
            return session.pk, session.group_name, session.last_seq
    user = local_user()
    with transaction.atomic():
        session = McpSession.objects.create(
            team=personal_team(user),
            owner=user,
            name=storable(details["name"])[:200],
            config=storable({"tap": details}),
            transport_name=TAP_TRANSPORT,
            status=McpSession.Status.CONNECTING,
            status_note="the tap started its server",
        )
    return session.pk, session.group_name, 0


def _no_such_process(pid: int) -> bool:
    """Whether no process has the number (another user's that has it now counts as one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class TapIngester:
    """Watch the spool folder and feed each run's frames to its session, until cancelled."""

    def __init__(self, layer: BaseChannelLayer, folder: Path | None = None) -> None:
        self.layer = layer
        self.folder = folder or spool_folder()
        self.runs: dict[str, _Run] = {}
        self.refused: set[str] = set()

    async def serve(self) -> None:
        try:
            while True:
                await self.scan()
                await asyncio.sleep(POLL)
        finally:
            for run in list(self.runs.values()):
                with contextlib.suppress(Exception):
                    await run.close()

    async def scan(self) -> None:
        """One look at the folder: every run, oldest first, takes what is new."""
        if not self._folder_ok():
            return
        with contextlib.suppress(OSError):
            for name in sorted(e.name for e in os.scandir(self.folder) if e.name.endswith(".jsonl")):
                if name in self.refused:
                    continue
                run = self.runs.get(name)
                if run is None:
                    run = self.runs[name] = _Run(self.folder / name, self.layer)
                try:
                    await run.pump()
                except Exception:
                    log.exception("ingesting tap spool %s failed; trying again", name)
                if run.done:
                    del self.runs[name]
                    if run.pk is None:
                        self.refused.add(name)

    def _folder_ok(self) -> bool:
        """The folder exists, is a folder (not a link) and is the inspector user's alone."""
        try:
            info = os.lstat(self.folder)
        except OSError:
            return False
        return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
