"""Warm starts: a stdio server started ahead of its connect is adopted whole, or killed when unused."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sessions.engine import ClientOptions, ClientSession, Frame, StdioTarget, WarmStarts
from sessions.engine._stdio import StdioTransport
from sessions.engine._warm import LATE
from sessions.engine.testing import ManualClock

pytestmark = pytest.mark.slow

WAIT = 20.0


def _marked(path: Path, server: list[str]) -> StdioTarget:
    """A target that appends a line to ``path`` as it starts (one line per process), then runs ``server``."""
    script = f"printf 'started\\n' >&2; printf 'x\\n' >> {path}; exec \"$@\""
    return StdioTarget("sh", ["-c", script, "sh", *server])


async def _gone(pid: int) -> None:
    async with asyncio.timeout(WAIT):
        while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
            await asyncio.sleep(0.02)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


async def _written(path: Path) -> None:
    async with asyncio.timeout(WAIT):
        while not path.exists():
            await asyncio.sleep(0.02)


async def test_a_held_server_is_adopted_by_the_connect_with_what_it_wrote_meanwhile(
    sdk_stdio: dict[str, Any], tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    target = _marked(starts, [sdk_stdio["command"], *sdk_stdio["args"]])
    warm = WarmStarts()
    assert await warm.offer(target)
    assert await warm.offer(_marked(starts, [sdk_stdio["command"], *sdk_stdio["args"]]))  # equal: kept
    assert len(warm) == 1
    await _written(starts)
    transport = await warm.take(target)
    assert transport is not None and transport.process is not None and len(warm) == 0
    pid = transport.process.pid
    frames: list[Frame] = []
    session = ClientSession(transport, ClientOptions(timeout=20))
    session.subscribe(lambda item: frames.append(item) if isinstance(item, Frame) else None)
    async with session:
        assert (await session.call_tool("add", {"a": 2, "b": 3}))["structuredContent"] == {"result": 5}
    spawned = next(f for f in frames if f.kind == "state" and (f.transport or {}).get("state") == "spawned")
    assert spawned.transport["stdio"]["pid"] == pid
    assert spawned.transport["stdio"]["warm_start"] > 0
    assert "a warm start" in spawned.note
    # The line it wrote on stderr before anyone read its pipes is on the timeline, after the start.
    stderr = [f.raw for f in frames if f.kind == "stderr"]
    assert b"started" in stderr
    assert starts.read_text() == "x\n"  # one process: the connect started none of its own
    await warm.close()


async def test_an_offer_nobody_takes_is_killed_when_its_time_is_up_and_only_an_equal_target_takes_one(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    warm = WarmStarts(keep=10, limit=2, clock=clock)
    sleeper = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    first, second, third = (_marked(tmp_path / name, sleeper) for name in ("a", "b", "c"))
    assert await warm.offer(first)
    pid_first = warm._held[0].transport.process.pid  # type: ignore[union-attr]
    clock.advance(6)
    assert await warm.offer(second)
    pid_second = warm._held[1].transport.process.pid  # type: ignore[union-attr]
    assert await warm.take(StdioTarget("sh", ["-c", "true"])) is None  # another target: nothing
    assert len(warm) == 2
    clock.advance(5)  # the first's ten seconds are up; the second has five left
    await _gone(pid_first)
    assert len(warm) == 1 and _state(pid_second) not in ("", "Z")
    assert await warm.take(first) is None
    # Beyond the limit the oldest goes, at once.
    assert await warm.offer(third)
    assert await warm.offer(_marked(tmp_path / "d", sleeper))
    await _gone(pid_second)
    assert len(warm) == 2
    await warm.close()
    assert len(warm) == 0


async def test_a_server_that_died_while_held_is_not_adopted() -> None:
    warm = WarmStarts()
    target = StdioTarget(sys.executable, ["-c", "import sys; sys.exit(3)"])
    assert await warm.offer(target)
    process = warm._held[0].transport.process
    assert process is not None
    async with asyncio.timeout(WAIT):
        await process.wait()
    assert await warm.take(target) is None
    await warm.close()


async def test_a_command_that_cannot_start_is_no_offer_and_is_not_tried_again_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = ManualClock()
    warm = WarmStarts(clock=clock)
    missing = StdioTarget(os.devnull + "/no-such-program")
    tried: list[Any] = []
    spawn = StdioTransport.spawn

    async def counted(transport: StdioTransport) -> None:
        tried.append(transport.target)
        await spawn(transport)

    monkeypatch.setattr(StdioTransport, "spawn", counted)
    assert not await warm.offer(missing)
    assert len(warm) == 0 and len(tried) == 1
    # The pointer on Connect again (a person hovering, a form changed elsewhere) starts nothing.
    assert not await warm.offer(missing)
    assert len(tried) == 1
    # Another target is tried at once; the failed one again once its time is up.
    assert not await warm.offer(StdioTarget(os.devnull + "/another"))
    clock.advance(warm.keep + 1)
    assert not await warm.offer(missing)
    assert len(tried) == 3


async def test_an_offer_that_arrives_just_after_its_connect_starts_nothing(tmp_path: Path) -> None:
    clock = ManualClock()
    warm = WarmStarts(clock=clock)
    target = _marked(tmp_path / "late", [sys.executable, "-c", "import sys; sys.stdin.read()"])
    warm.connecting("page-1")
    assert await warm.take(target) is None  # the click won the race: the connect starts its own
    assert not await warm.offer(target, "page-1")
    assert len(warm) == 0 and not (tmp_path / "late").exists()
    # Another page's hover (a connect right after a disconnect) is a new intent, even at once.
    assert await warm.offer(target, "page-2")
    assert len(warm) == 1
    await warm.close()
    clock.advance(LATE + 1)  # remembered for a while, not for ever
    assert await warm.offer(target, "page-1")
    await warm.close()
