"""The session runtime: owner tasks, the recorder, commands over the channel layer, the live consumer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from support.teams import ateam_of
from support.web import (
    WAIT,
    anonymous_communicator,
    frames_of,
    frames_stored,
    live_runtime,
    make_user,
    receive_until,
    request,
    session_communicator,
    start_session,
    stdio_config,
    wait_for_tool,
    wait_until,
    waiting_review,
)

from sessions.models import McpSession, PendingReview, TimelineFrame
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.host import ensure_embedded_runtime
from sessions.timeline.queries import TimelineFilter, page_of_rows

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def everything(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return stdio_config(spec["command"], spec["args"], **extra)


async def test_a_session_records_every_frame_in_order_and_answers_requests(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        assert session.protocol_version == "2025-11-25"
        assert session.server_info["name"] == "mcp-servers/everything"
        answer = await request(session, "tools/call", {"name": "echo", "arguments": {"message": "hi"}})
        assert answer["event"] == "done"
        assert answer["result"]["content"][0]["text"] == "Echo: hi"
        await client.call(session, m.Disconnect())
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "closed")
    frames = await frames_of(session)
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))
    assert frames[-1].kind == "state"
    assert any(f.method == "tools/call" and f.direction == "in" for f in frames)
    done = await McpSession.objects.aget(pk=session.pk)
    assert done.last_seq == frames[-1].seq and done.worker_channel == "" and done.ended is not None


async def test_a_reconnect_continues_the_same_timeline_without_reusing_ids(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        await request(session, "ping")
        await client.call(session, m.Disconnect())
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "closed")
        await client.start_session(session)
        session = await wait_until(
            lambda: (s := McpSession.objects.get(pk=session.pk)).status == "ready" and s.worker_channel and s
        )
        await request(session, "ping")
    frames = await frames_of(session)
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))
    ids = [f.rpc_id for f in frames if f.direction == "out" and f.rpc_kind == "request"]
    assert len(ids) == len(set(ids))


async def test_the_consumer_sends_frames_after_n_then_live_ones_without_gaps_or_repeats(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        stored = await wait_until(
            lambda: (
                TimelineFrame.objects.filter(session=session).count() >= 8
                and TimelineFrame.objects.filter(session=session).count()
            )
        )
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/?after=3&first=1")
        connected, _ = await communicator.connect(timeout=WAIT)
        assert connected
        first = await communicator.receive_from(timeout=WAIT)
        assert 'id="f-4"' in first and 'id="f-3"' not in first
        assert f'id="f-{stored}"' in first
        await request(session, "tools/call", {"name": "echo", "arguments": {"message": "live"}})
        seen = first
        async with asyncio.timeout(WAIT):
            while "Echo: live" not in seen:
                seen += await communicator.receive_from(timeout=WAIT)
        for seq in range(4, stored + 1):
            assert seen.count(f'id="f-{seq}"') == 1
        await communicator.disconnect()


async def test_another_users_session_is_refused_on_the_websocket(everything_stdio: dict) -> None:
    async with live_runtime():
        alice, bob = await make_user("alice"), await make_user("bob")
        session = await McpSession.objects.acreate(
            owner=alice, team=await ateam_of(alice), name="x", config=everything(everything_stdio)
        )
        communicator = await session_communicator(bob, f"/ws/sessions/{session.public_id}/")
        assert await communicator.connect(timeout=WAIT) == (False, 4404)  # as if it did not exist
        nobody = anonymous_communicator(f"/ws/sessions/{session.public_id}/")
        assert await nobody.connect(timeout=WAIT) == (False, 4401)  # not logged in


async def test_a_sampling_request_is_stored_for_review_and_answered_through_the_owner(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        await wait_for_tool(session, "trigger-sampling-request")
        call = asyncio.ensure_future(
            request(
                session,
                "tools/call",
                {"name": "trigger-sampling-request", "arguments": {"prompt": "hey"}},
                wait=30,
            )
        )
        review = await waiting_review(session, "sampling/createMessage")
        answer = {
            "role": "assistant",
            "content": {"type": "text", "text": "hello back"},
            "model": "person",
            "stopReason": "endTurn",
        }
        await client.call(session, m.Respond(review.key, answer, edited=True, user_id=alice.pk))
        outcome = await asyncio.wait_for(call, 30)
        assert "hello back" in str(outcome["result"])
        review = await wait_until(
            lambda: PendingReview.objects.filter(pk=review.pk, status="answered").first()
        )
        assert review.edited and review.answered_by_id == alice.pk and review.answer == answer


async def test_the_consumer_filters_and_pages_on_request_and_resumes_live(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        for n in range(3):
            await request(session, "tools/call", {"name": "echo", "arguments": {"message": f"m{n}"}})
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/?after=0")
        connected, _ = await communicator.connect(timeout=WAIT)
        assert connected
        first = await communicator.receive_from(timeout=WAIT)
        assert 'id="f-1"' in first
        while await communicator.receive_nothing(timeout=0.5) is False:
            await communicator.receive_from(timeout=WAIT)
        await communicator.send_to(
            text_data=json.dumps({"action": "filter", "method": "tools/", "HEADERS": {}})
        )
        filtered = await communicator.receive_from(timeout=WAIT)
        assert "tools/call" in filtered and "initialize" not in filtered
        assert 'hx-swap-oob="true"' in filtered  # the whole window is replaced
        await communicator.send_to(text_data=json.dumps({"action": "live", "HEADERS": {}}))
        live = await communicator.receive_from(timeout=WAIT)
        assert "following live" in live and "initialize" not in live  # back to live keeps the filter
        await communicator.send_to(text_data=json.dumps({"action": "filter", "method": "", "HEADERS": {}}))
        everything_again = await communicator.receive_from(timeout=WAIT)
        assert "initialize" in everything_again and "tools/call" in everything_again
        await communicator.send_to(text_data="not json")
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()


async def test_the_timeline_filters_by_the_rule_a_frame_broke(bad_stdio: Any) -> None:
    # Also runs on PostgreSQL (tests/hosted/test_hosted.py): the filter reads the verdicts' JSON as jsonb.
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("violations")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        await request(session, "tools/list")
        await wait_until(lambda: TimelineFrame.objects.filter(session=session, worst="error").count() >= 4)

        def seqs(rule: str) -> list[int]:
            return [row["seq"] for row in page_of_rows(session, TimelineFilter.from_data({"rule": rule}))]

        unknown = await database_sync_to_async(seqs)("unknown-id")
        assert len(unknown) == 1
        frame = await TimelineFrame.objects.aget(session=session, seq=unknown[0])
        assert frame.rpc_id == "999"
        assert len(await database_sync_to_async(seqs)("duplicate-response")) == 2
        assert await database_sync_to_async(seqs)("no-such-rule") == []
        assert TimelineFilter.from_data({"rule": "x'); drop"}).rule == ""  # not a rule code: ignored
        row = {"method": "", "direction": "in", "rpc_kind": "result", "kind": "message", "preview": "",
               "worst": "error", "verdicts": [{"code": "unknown-id"}]}  # fmt: skip
        assert TimelineFilter(rule="unknown-id").matches(row)
        assert not TimelineFilter(rule="duplicate-response").matches(row)


async def test_a_withdrawn_server_request_leaves_the_review_withdrawn(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("withdraw")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        outcome = await request(session, "tools/call", {"name": "t", "arguments": {}}, wait=10)
        assert outcome["result"]["content"][0]["text"] == "withdrawn"
        review = await wait_until(
            lambda: PendingReview.objects.filter(session=session, status="withdrawn").first()
        )
        assert review.method == "sampling/createMessage" and "cancelled" in review.detail


async def test_reconnecting_while_the_old_owner_is_still_stopping_starts_a_new_one(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        old_channel = session.worker_channel
        await client.call(session, m.Disconnect())
        await client.start_session(session)  # at once: the old owner is still closing the server
        renewed = await wait_until(
            lambda: (
                (s := McpSession.objects.get(pk=session.pk)).status == "ready"
                and s.worker_channel not in ("", old_channel)
                and s
            )
        )
        assert (await request(renewed, "ping"))["event"] == "done"


async def test_an_owner_keeps_nothing_of_a_call_once_answered_and_its_answer_is_the_frames(
    everything_stdio: dict,
) -> None:
    """The answer to a request is drawn from the frames the engine made, which are what is stored."""
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        for _ in range(5):
            await client.call(session, m.Feature("ping"))
        answer = await request(session, "tools/list")
        assert answer["latency_ms"] is not None and answer["response_seq"] > answer["request_seq"]
        await frames_stored(session, answer["request_seq"], answer["response_seq"])
        stored = await frames_of(session, seq__in=[answer["request_seq"], answer["response_seq"]])
        assert [(f.method, f.direction) for f in stored] == [("tools/list", "out"), ("tools/list", "in")]
        facts = (stored[1].latency_ms, stored[1].size, stored[1].verdicts, stored[1].note or None)
        assert (answer["latency_ms"], answer["size"], answer["verdicts"], answer["note"]) == facts
        owner = ensure_embedded_runtime().owners[session.pk]  # type: ignore[union-attr]
        assert owner.calls == {} and not hasattr(owner, "responses")
        await client.call(session, m.Disconnect())


async def test_the_consumer_survives_hostile_query_strings_and_messages(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        await wait_until(lambda: TimelineFrame.objects.filter(session=session).count() >= 4)
        query = "after=%C2%B2&first=" + "9" * 30  # a Unicode digit, a number past any column
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/?{query}")
        connected, _ = await communicator.connect(timeout=WAIT)
        assert connected
        assert 'id="f-1"' in await communicator.receive_from(timeout=WAIT)  # read from the start
        await communicator.send_to(text_data="[" * 100_000 + "]" * 100_000)  # deeper than the parser goes
        await communicator.send_to(text_data=json.dumps({"action": "filter", "method": "initialize"}))
        seen = ""
        async with asyncio.timeout(WAIT):
            while 'id="f-4"' not in seen:  # the filtered rows: the consumer is still there
                seen += await communicator.receive_from(timeout=WAIT)
        await communicator.disconnect()


def _frame_count(last: int) -> str:
    return f'id="frame-count" class="muted" hx-swap-oob="true">{last}<'


async def test_log_lines_reach_a_tab_only_while_it_shows_the_logging_panel_which_is_redrawn_on_opening(
    bad_stdio: Any,
) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("flood")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
        assert (await communicator.connect(timeout=WAIT))[0]
        await communicator.send_to(json.dumps({"action": "panel", "name": "tools"}))
        await request(session, "tools/call", {"name": "t", "arguments": {"count": 30}})
        last = (await database_sync_to_async(McpSession.objects.get)(pk=session.pk)).last_seq
        seen = await receive_until(communicator, _frame_count(last))  # every batch was sent
        assert "log-line" not in seen
        message = {"action": "panel", "name": "logging", "min_level": "debug"}
        await communicator.send_to(json.dumps(message))
        redrawn = await receive_until(communicator, 'hx-swap-oob="innerHTML"')
        assert redrawn.count('class="log-line') == 30 and '"i": 29' in redrawn.replace("&quot;", '"')
        await request(session, "tools/call", {"name": "t", "arguments": {"count": 3}})
        last = (await database_sync_to_async(McpSession.objects.get)(pk=session.pk)).last_seq
        live = await receive_until(communicator, _frame_count(last))
        assert "beforeend:#log-lines" in live and live.count('class="log-line') == 3
        await communicator.disconnect()
