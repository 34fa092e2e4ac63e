"""The owner's collaborators on their own: the viewers and idle timer, the limits, OAuth's plumbing."""

from __future__ import annotations

import asyncio

import pytest
from pytest_django.fixtures import Settings

from sessions.engine import EngineError, Frame
from sessions.runtime.limits import SessionLimits
from sessions.runtime.oauth import SessionOAuth, TeamTokenStore
from sessions.runtime.viewers import Viewers


class Stops:
    """A stand-in for the owner's ``stop``: the reasons it was given, and an event once it was."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.stopped = asyncio.Event()

    def __call__(self, reason: str) -> None:
        self.reasons.append(reason)
        self.stopped.set()


async def test_the_idle_timer_runs_only_while_nobody_watches_and_ends_the_session(
    settings: Settings,
) -> None:
    settings.INSPECTOR_IDLE_TIMEOUT = 0.05
    stop = Stops()
    viewers = Viewers(stop)
    viewers.arm()
    assert viewers.idle
    viewers.changed(+1)
    assert not viewers.idle and viewers.count == 1
    viewers.changed(+1)
    viewers.changed(-1)
    assert not viewers.idle  # one tab still watches
    viewers.changed(-1)
    assert viewers.idle
    await asyncio.wait_for(stop.stopped.wait(), 5)
    assert stop.reasons == ["no viewer for 0.05 s (INSPECTOR_IDLE_TIMEOUT)"]


async def test_an_ending_session_disarms_its_idle_timer(settings: Settings) -> None:
    settings.INSPECTOR_IDLE_TIMEOUT = 60
    viewers = Viewers(Stops())
    viewers.arm()
    handle = viewers._idle
    assert handle is not None
    viewers.disarm()
    assert not viewers.idle and handle.cancelled()


async def test_no_idle_timer_when_the_setting_is_zero(settings: Settings) -> None:
    settings.INSPECTOR_IDLE_TIMEOUT = 0
    viewers = Viewers(Stops())
    viewers.arm()
    viewers.changed(-1)
    assert not viewers.idle


def test_the_limit_records_its_frame_with_the_next_number_then_ends_the_session(
    settings: Settings,
) -> None:
    settings.INSPECTOR_MAX_SESSION_FRAMES = 5
    settings.INSPECTOR_MAX_SESSION_BYTES = 0
    recorded: list[Frame] = []
    stop = Stops()
    limits = SessionLimits(1, lambda make: recorded.append(make(len(recorded) + 10)), stop)
    limits.start(frames=3, size=0)  # three frames stored before a reconnect
    assert not limits.end_if_full()
    limits.count(100)
    assert not limits.limited and recorded == [] and stop.reasons == []
    limits.count(100)
    assert limits.limited
    assert [(f.seq, f.transport["state"], f.transport["value"]) for f in recorded] == [(10, "limit", 5)]
    assert stop.reasons == [recorded[0].note] and "INSPECTOR_MAX_SESSION_FRAMES" in stop.reasons[0]


def test_a_reconnect_of_a_full_session_ends_at_once(settings: Settings) -> None:
    settings.INSPECTOR_MAX_SESSION_FRAMES = 0
    settings.INSPECTOR_MAX_SESSION_BYTES = 1000
    recorded: list[Frame] = []
    stop = Stops()
    limits = SessionLimits(1, lambda make: recorded.append(make(1)), stop)
    limits.start(frames=7, size=1000)
    assert limits.end_if_full() and limits.limited
    assert recorded[0].transport["limit"] == "INSPECTOR_MAX_SESSION_BYTES" and len(stop.reasons) == 1


async def test_an_authorization_goes_on_only_with_the_answer_it_waits_for() -> None:
    oauth = SessionOAuth(1, lambda event: None)
    with pytest.raises(EngineError, match="no authorization"):
        oauth.returned("unknown", "https://app.example/oauth/callback?code=x")
    arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    oauth.authorizations["digest"] = arrived
    oauth.returned("digest", "https://app.example/oauth/callback?code=x")
    assert arrived.result() == "https://app.example/oauth/callback?code=x"
    with pytest.raises(EngineError, match="no authorization"):  # answered once only
        oauth.returned("digest", "https://app.example/oauth/callback?code=y")


async def test_a_step_waits_for_the_debugger_and_is_refused_without_one() -> None:
    plain = SessionOAuth(1, lambda event: None)
    with pytest.raises(EngineError, match="not an OAuth debugger"):
        await plain.step(run_all=False)

    debugging = SessionOAuth(2, lambda event: None)
    debugging.expect_debugger()
    step = asyncio.ensure_future(debugging.step(run_all=True))
    await asyncio.sleep(0)
    assert not step.done()  # the debugger's session has no debugger yet: the step waits
    debugging.debugging(None)  # it could not have one
    with pytest.raises(EngineError, match="not an OAuth debugger"):
        await step


async def test_forgetting_tokens_drops_the_one_in_use_and_what_the_store_holds() -> None:
    class Auth:
        forgotten = False

        def forget(self) -> None:
            self.forgotten = True

    class Transport:
        auth = Auth()

    class Client:
        transport = Transport()

    oauth = SessionOAuth(1, lambda event: None)
    await oauth.forget(None)  # no connection, no store: nothing to drop
    oauth.tokens = TeamTokenStore(1, None, "key", {"access_token": "secret"})
    client = Client()
    await oauth.forget(client)
    assert client.transport.auth.forgotten
    assert oauth.tokens.data == {} and oauth.tokens.load("key") is None
