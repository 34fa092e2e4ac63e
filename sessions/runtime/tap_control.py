"""The inspector's end of a tap's control channel (``inspector/tap/_control.py`` is the tap's).

A running stdio tap listens on ``<data folder>/taps/<run>.sock`` (0600, in the 0700 folder). The
inspector sends it one JSON command a line and reads one answer a line; it speaks only to a socket
whose peer is its own user (``SO_PEERCRED``), as the tap answers only its own user. ``command`` is
one exchange (the views: rules, faults, a held message decided); ``watch`` follows the tap's state
(the tap ingester: it tells the session's open tabs, ``TapChanged``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from sessions.models import McpSession

__all__ = [
    "HOSTED_COMMAND",
    "MAX_LINE",
    "TapRefused",
    "TapUnreachable",
    "command",
    "run_of",
    "socket_path",
    "target_of",
    "watch",
]

MAX_LINE = 48 * 1024 * 1024
"""The longest answer read: a state with held messages (each shown up to 256 KiB)."""
RUN = re.compile(r"\d{13}-\d{1,10}-[0-9a-f]{8}")
"""A run's name, as the tap makes it: its spool file's and its socket's."""
_SUN_PATH = 100
HOSTED_COMMAND = "tap.command"
"""The channel-layer message that carries a command to the web process recording a hosted tap session."""
_HOSTED = "hosted "


class TapUnreachable(Exception):
    """The tap does not answer: it has ended, or it is not this user's."""


class TapRefused(Exception):
    """The tap answered that it cannot do the command (why, for a person)."""


def run_of(session: McpSession) -> str:
    """The tap run whose socket commands a tap session (its own, or its tap's); "" when it has none."""
    tap = session.config.get("tap") if isinstance(session.config, dict) else None
    run = (tap.get("control") or tap.get("run")) if isinstance(tap, dict) else None
    return run if isinstance(run, str) and RUN.fullmatch(run) else ""


def target_of(session: McpSession) -> str:
    """Where a tap session's commands go: its tap's run (local), or, for a live hosted one, the channel
    of the web process that records it (``inspector/tap_gates.py`` answers there); "" when nowhere."""
    run = run_of(session)
    if run:
        return run
    tap = session.config.get("tap") if isinstance(session.config, dict) else None
    if isinstance(tap, dict) and tap.get("endpoint") and session.worker_channel and session.is_live:
        return f"{_HOSTED}{session.pk} {session.worker_channel}"
    return ""


async def _hosted(target: str, message: dict[str, Any], timeout: float) -> dict[str, Any]:
    """A command to a hosted tap session, over the channel layer; the recording process's answer."""
    from channels.layers import get_channel_layer

    pk, _, channel = target.removeprefix(_HOSTED).partition(" ")
    layer = get_channel_layer()
    try:
        reply = await layer.new_channel()
        await layer.send(
            channel, {"type": HOSTED_COMMAND, "session": int(pk), "command": message, "reply": reply}
        )
        answer = await asyncio.wait_for(layer.receive(reply), timeout)
    except TimeoutError as exc:
        raise TapUnreachable("the web process recording it did not answer in time") from exc
    except Exception as exc:  # the channel layer is down
        why = type(exc).__name__
        raise TapUnreachable(f"the web process recording it cannot be reached ({why})") from exc
    if not answer.get("ok"):
        raise TapRefused(str(answer.get("error") or "the tap refused"))
    return dict(answer)


def socket_path(run: str) -> Path:
    """Where the tap of ``run`` takes commands (``inspector.tap._spool`` puts it there)."""
    return Path(settings.DATA_DIR) / "taps" / f"{run}.sock"


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


async def _connect(run: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if not RUN.fullmatch(run):
        raise TapUnreachable("this session has no tap to talk to")
    path = str(socket_path(run))
    folder: int | None = None
    try:
        if len(path.encode()) > _SUN_PATH:  # too long for a socket address: through the folder's descriptor
            folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            path = f"/proc/self/fd/{folder}/{os.path.basename(path)}"
        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_LINE)
    except OSError as exc:
        raise TapUnreachable("the tap is not running (its host has ended it)") from exc
    finally:
        if folder is not None:
            os.close(folder)
    sock = writer.get_extra_info("socket")
    if sock is None or _peer_uid(sock) != os.getuid():
        writer.close()
        raise TapUnreachable("the socket is not a tap of this user's")
    return reader, writer


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, message: dict[str, Any]
) -> dict[str, Any]:
    writer.write(json.dumps(message).encode() + b"\n")
    await writer.drain()
    try:
        line = await reader.readline()
    except ValueError as exc:  # longer than the limit
        raise TapUnreachable("the tap's answer is too long") from exc
    if not line:
        raise TapUnreachable("the tap closed the connection")
    answer = json.loads(line)
    if not isinstance(answer, dict):
        raise TapUnreachable("the tap's answer is not an object")
    if not answer.get("ok"):
        raise TapRefused(str(answer.get("error") or "the tap refused"))
    return answer


async def command(run: str, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Send one command to the tap of ``run`` (or ``target_of``'s hosted target); its answer
    (``TapRefused``: why it said no)."""
    if run.startswith(_HOSTED):
        return await _hosted(run, message, timeout)
    reader, writer = await _connect(run)
    try:
        return await asyncio.wait_for(_exchange(reader, writer, message), timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise TapUnreachable(f"the tap did not answer ({exc or 'in time'})") from exc
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def watch(run: str, on_state: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Call ``on_state`` with the tap's state now and after each change, until the tap ends."""
    reader, writer = await _connect(run)
    try:
        answer = await asyncio.wait_for(_exchange(reader, writer, {"op": "watch"}), 5.0)
        await on_state(answer.get("state") or {})
        while line := await reader.readline():
            event = json.loads(line)
            if isinstance(event, dict) and isinstance(event.get("state"), dict):
                await on_state(event["state"])
    except (OSError, TimeoutError, ValueError, TapRefused):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
