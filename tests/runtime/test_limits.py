"""Limits: a session ends at its frame or byte limit with a state frame that says which, losing nothing
before it; the per-team live-session cap's helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings
from support.teams import ateam_of
from support.web import frames_of, live_runtime, make_user, start_session, stdio_config, wait_until

from sessions.models import McpSession, TimelineFrame
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.limits import (
    SessionBudget,
)

# --- the budget: what counts, and when it is reached --------------------------------------------


def test_the_frame_that_reaches_the_frame_limit_is_the_last_counted() -> None:
    budget = SessionBudget(max_frames=3, max_bytes=0)
    assert budget.count(10) is None
    assert budget.count(10) is None
    reached = budget.count(10)
    assert reached is not None and reached.setting == "INSPECTOR_MAX_SESSION_FRAMES" and reached.value == 3
    assert "limit of 3 frames" in reached.message and "INSPECTOR_MAX_SESSION_FRAMES" in reached.message


def test_the_frame_that_crosses_the_byte_limit_reaches_it_and_the_message_says_how_much() -> None:
    budget = SessionBudget(max_frames=0, max_bytes=2 << 20)
    assert budget.count(1 << 20) is None
    assert budget.count((1 << 20) - 1) is None  # one byte short
    reached = budget.count(5000)
    assert reached is not None and reached.setting == "INSPECTOR_MAX_SESSION_BYTES"
    assert reached.value == 2 << 20 and "2 MiB (2,097,152 bytes)" in reached.message


def test_no_limit_when_both_are_zero_and_a_reconnect_continues_the_count() -> None:
    unlimited = SessionBudget(max_frames=0, max_bytes=0)
    assert all(unlimited.count(1 << 30) is None for _ in range(1000))
    again = SessionBudget(max_frames=100, max_bytes=0, frames=99)  # 99 frames stored before the reconnect
    assert again.reached() is None
    assert again.count(1) is not None
    full = SessionBudget(max_frames=100, max_bytes=0, frames=100)
    assert full.reached() is not None  # a reconnect of a full session records nothing more


def test_the_limit_frame_names_the_limit_and_its_value() -> None:
    reached = SessionBudget(max_frames=1, max_bytes=0).count(0)
    assert reached is not None
    frame = reached.frame(7)
    assert (frame.kind, frame.direction, frame.seq) == ("state", "local", 7)
    assert frame.transport == {"state": "limit", "limit": "INSPECTOR_MAX_SESSION_FRAMES", "value": 1}
    assert frame.note == reached.message


def test_the_settings_refuse_a_negative_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from sessions.env import envint

    monkeypatch.setenv("INSPECTOR_MAX_SESSION_FRAMES", "-1")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        envint("INSPECTOR_MAX_SESSION_FRAMES", 0, minimum=0)


# --- a real server that floods ------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def _flood_until_ended(bad_stdio: Any) -> tuple[McpSession, list[TimelineFrame]]:
    """Start the stderr-flood server, set it flooding, and wait until its session has ended."""
    async with live_runtime():
        spec = bad_stdio("stderr-flood")
        session = await start_session(await make_user(), stdio_config(spec["command"], spec["args"]))
        await client.send_command(session, m.Request("tools/call", {"name": "t", "arguments": {}}))
        ended = await wait_until(
            lambda: (s := McpSession.objects.get(pk=session.pk)).status not in McpSession.LIVE and s,
            what="the session ended",
        )
    return ended, await frames_of(session)


def _check_nothing_lost(session: McpSession, frames: list[TimelineFrame]) -> None:
    """Every seq from 1 to the limit frame, which is last; every stderr line in order; the server gone."""
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))
    assert session.last_seq == frames[-1].seq
    lines = [bytes(f.raw).decode() for f in frames if f.kind == "stderr"]
    assert len(lines) > 10 and lines == [f"stderr flood {i}" for i in range(len(lines))]
    assert frames[-1].kind == "state" and frames[-1].transport["state"] == "limit"
    assert session.status == "closed" and session.status_note == frames[-1].note
    spawned = next(f for f in frames if f.transport.get("state") == "spawned")
    assert not _alive(spawned.transport["stdio"]["pid"]), "the flooding server outlived its session"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_stderr_flood_ends_at_the_frame_limit_with_every_frame_up_to_it(
    bad_stdio: Any, settings: Settings
) -> None:
    settings.INSPECTOR_MAX_SESSION_FRAMES = 300
    settings.INSPECTOR_MAX_SESSION_BYTES = 0
    session, frames = await _flood_until_ended(bad_stdio)
    _check_nothing_lost(session, frames)
    assert len(frames) == 301  # 300 frames, then the one that says why there are no more
    assert frames[-1].transport == {"state": "limit", "limit": "INSPECTOR_MAX_SESSION_FRAMES", "value": 300}
    assert "limit of 300 frames (INSPECTOR_MAX_SESSION_FRAMES)" in session.status_note


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_stderr_flood_ends_at_the_byte_limit_and_a_reconnect_records_nothing_more(
    bad_stdio: Any, settings: Settings
) -> None:
    settings.INSPECTOR_MAX_SESSION_FRAMES = 0
    settings.INSPECTOR_MAX_SESSION_BYTES = 8000
    session, frames = await _flood_until_ended(bad_stdio)
    _check_nothing_lost(session, frames)
    sizes = [f.size for f in frames[:-1]]
    assert sum(sizes) >= 8000 > sum(sizes[:-1])  # the frame that crossed the limit is the last one kept
    assert frames[-1].transport == {"state": "limit", "limit": "INSPECTOR_MAX_SESSION_BYTES", "value": 8000}
    assert "limit of 7.812 KiB (8,000 bytes) of frames" in session.status_note

    # Reconnecting a full session starts no server: one state frame says why, and it ends at once.
    async with live_runtime():
        await client.start_session(session)
        again = await wait_until(
            lambda: (
                (s := McpSession.objects.get(pk=session.pk)).last_seq > session.last_seq
                and s.status not in McpSession.LIVE
                and s
            ),
            what="the reconnect refused",
        )
    more = await frames_of(session, seq__gt=session.last_seq)
    assert [(f.kind, f.transport.get("state")) for f in more] == [("state", "limit")]
    assert again.status == "failed" and "INSPECTOR_MAX_SESSION_BYTES" in again.status_note


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_flood_before_the_handshake_ends_ends_the_session_at_once_not_when_initialize_times_out(
    bad_stdio: Any, settings: Settings
) -> None:
    settings.INSPECTOR_MAX_SESSION_FRAMES = 100
    settings.INSPECTOR_MAX_SESSION_BYTES = 0
    spec = bad_stdio("stderr-flood-init")
    config = stdio_config(spec["command"], spec["args"], timeout=600, max_total_timeout=600)
    async with live_runtime():
        owner = await make_user()
        session = await McpSession.objects.acreate(
            owner=owner, team=await ateam_of(owner), name="s", config=config
        )
        await client.start_session(session)
        # Well before initialize's 600 s timeout: the wait fails the test otherwise.
        ended = await wait_until(
            lambda: (s := McpSession.objects.get(pk=session.pk)).status not in McpSession.LIVE and s,
            what="the session ended",
        )
    frames = await frames_of(session)
    _check_nothing_lost(ended, frames)
    assert len(frames) == 101
    assert "limit of 100 frames" in ended.status_note
