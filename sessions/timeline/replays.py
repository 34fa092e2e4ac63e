"""A replay beside its recording (the web's "Replay against…"): both sessions' stored messages read as
conversations and compared step by step by ``sessions.replay``, shaped for the side-by-side page."""

from __future__ import annotations

from typing import Any

from sessions.frames import frame_of
from sessions.models import McpSession, TimelineFrame
from sessions.replay import Conversation, RecordingProblem, for_page, paired, summary

__all__ = ["conversation_of", "side_by_side"]


def _messages(session: McpSession) -> list[Any]:
    rows = TimelineFrame.objects.filter(session=session, kind="message").order_by("seq")
    # frame_of reads every column but the preview: a deferred one would cost a query per frame.
    return [frame_of(row) for row in rows.defer("preview")]


def conversation_of(session: McpSession) -> Conversation:
    """The session's conversation, as a replay would send it; ``RecordingProblem`` says why it cannot be."""
    return Conversation.of(_messages(session))


def side_by_side(replay: McpSession, recording: McpSession) -> dict[str, Any]:
    """What the page shows: the summary, and each step with its changes and both sides."""
    recorded = conversation_of(recording)
    try:
        replayed: Conversation | None = conversation_of(replay)
    except RecordingProblem:  # not initialized yet
        replayed = None
    complete = not replay.is_live
    steps, sides, waiting = paired(recorded, replayed, complete=complete, latency=replay.replay_latency)
    notes = [] if replay.replay_latency else ["a step that became slower is not counted as a change."]
    data = for_page({"notes": notes, **summary(steps)})
    for step in data["report"]:
        side = sides.get(step["step"])
        step["waiting"] = step["step"] in waiting
        if side is not None:
            step["sides"] = {
                "recorded": side.recorded,
                "replayed": side.replayed,
                "recorded_seq": side.recorded_seq,
                "replayed_seq": side.replayed_seq,
            }
    data["waiting"] = len(waiting)
    data["unchanged"] -= len(waiting)
    data["complete"] = complete
    return data
