"""A window of the message flow: the timeline's page of rows, placed with what surrounds it.

The rows are the table's (``page_of_rows``, the same filter and page size); around them, a bounded
number of queries whatever the session's size: the requests still open when the window starts (to
nest what comes inside them), the answers that came after it (to join a request to its answer),
and the members of the window's batches.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from sessions.models import McpSession, TimelineFrame
from sessions.timeline.flow import FlowItem, FlowState, batch_members

__all__ = ["LOOKBACK", "connection_base", "flow_of", "placed", "window"]

# How far before a window to look for calls still open at its start (frames), and how many.
LOOKBACK = 5000
OPEN_CALLS = 200
BATCH_BYTES = 1_000_000  # a batch bigger than this is drawn without its members joined


def connection_base(session: McpSession, seq: int) -> int:
    """The stored seq of frame 0 of the connection that recorded ``seq`` (0 for the first)."""
    base = 0
    for phase in session.phases if isinstance(session.phases, list) else ():
        if not isinstance(phase, dict) or phase.get("state") != "connecting":
            continue
        at = phase.get("seq")
        if isinstance(at, int) and at <= seq:
            base = max(base, at - 1)
    return base


def flow_of(
    session: McpSession, rows: list[dict[str, Any]], *, frames: QuerySet[TimelineFrame] | None = None
) -> tuple[list[FlowItem], FlowState]:
    """Place a window of rows (seq order); the state after it, for a live tab to keep feeding."""
    if not rows:
        return [], FlowState(base=connection_base(session, session.last_seq))
    if frames is None:
        frames = TimelineFrame.objects.filter(session=session)
    first = rows[0]["seq"]
    before = list(
        frames.filter(seq__lt=first, seq__gte=first - LOOKBACK, kind="message", rpc_kind="request")
        .order_by("-seq")
        .values("seq", "direction", "rpc_id", "method", "wall")[:OPEN_CALLS]
    )[::-1]
    answered_inside = {r["pair_seq"] for r in rows if r["pair_seq"] is not None}
    waiting = [r for r in rows if r["rpc_kind"] == "request" and r["seq"] not in answered_inside]
    asked = {r["seq"] for r in before} | {r["seq"] for r in waiting}
    answers: dict[int, tuple[int, float | None]] = {}
    ids = {r["rpc_id"] for r in [*before, *waiting] if r["rpc_id"]}
    if ids:
        low = min(asked)
        found = frames.filter(
            rpc_id__in=sorted(ids), seq__gt=low, kind="message", rpc_kind__in=("result", "error")
        ).values_list("pair_seq", "seq", "latency_ms")
        for pair, seq, latency in found:
            if pair is not None and pair in asked and pair not in answers:
                answers[pair] = (seq, latency)
    state = FlowState(base=connection_base(session, first), answers=answers, batches=_batches(frames, rows))
    # What was asked before the window and answered in it or later was open when the window starts.
    still_open = [r for r in before if r["seq"] in answers and answers[r["seq"]][0] >= first]
    state.feed([{**r, "kind": "message", "rpc_kind": "request", "transport": {}} for r in still_open])
    return state.feed(rows), state


def _batches(frames: QuerySet[TimelineFrame], rows: list[dict[str, Any]]) -> dict[int, list[tuple[str, str]]]:
    """The requests and responses inside each batch of the window (bytes read only for batches)."""
    seqs = [r["seq"] for r in rows if r["rpc_kind"] == "batch" and r["size"] <= BATCH_BYTES]
    if not seqs:
        return {}
    return {
        seq: batch_members(bytes(raw)) for seq, raw in frames.filter(seq__in=seqs).values_list("seq", "raw")
    }


def placed(rows: list[dict[str, Any]], items: list[FlowItem]) -> list[dict[str, Any]]:
    """The rows with their place in the flow (``row["flow"]``), for a template."""
    return [{**row, "flow": item} for row, item in zip(rows, items, strict=True)]


def window(session: McpSession, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], FlowState]:
    """A window of rows placed in the flow, and the state after it."""
    items, state = flow_of(session, rows)
    return placed(rows, items), state
