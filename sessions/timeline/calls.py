"""A request the person made, read back from the timeline: what was asked, how far it got, how it ended."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Q

from sessions.engine import OUTPUT_CODES, OUTPUT_MATCHES
from sessions.frames import message_of
from sessions.models import McpSession, TimelineFrame

__all__ = ["call_context", "draws_a_card", "output_verdict", "recent_calls", "whole"]

# Requests the client makes by itself (and completion lookups, which a form makes as the person types):
# on the timeline, with no card in the Requests list.
NO_CARD = ("initialize", "ping", "completion/complete")


def draws_a_card(row: dict[str, Any]) -> bool:
    """Whether a stored frame (a row's fields) is a request the Requests list shows a card for."""
    method = row.get("method") or ""
    return (
        row.get("direction") == "out"
        and row.get("rpc_kind") == "request"
        and method not in NO_CARD
        and not method.endswith("/list")
        and bool(row.get("rpc_id"))
    )


# A result bigger than this is not rendered into its call card (a 100 MB tool result made the session
# page 104 MB, on every reload): the card shows its head, its size and a download of the whole frame.
CARD_BYTES = 1 << 20
HEAD_CHARS = 64 * 1024


def _message(frame: TimelineFrame | None) -> dict[str, Any]:
    return message_of(frame.raw) if frame is not None else {}


def _too_big(frame: TimelineFrame) -> dict[str, Any]:
    """What a card shows of a response too big to render: its head as text, its size, its frame."""
    head = bytes(frame.raw[:HEAD_CHARS]).decode("utf-8", errors="replace")
    return {"too_big": {"size": frame.size, "head": head, "seq": frame.seq}}


def _progress(session: McpSession, rpc_id: int | str, since: int) -> dict[str, Any] | None:
    """Return the latest progress notification for a request (its token is the request id)."""
    frames = TimelineFrame.objects.filter(
        session=session, method="notifications/progress", direction="in", seq__gt=since
    ).order_by("-seq")[:200]
    for frame in frames:
        params = _message(frame).get("params") or {}
        if params.get("progressToken") == rpc_id:
            return {
                "rpc_id": rpc_id,
                "progress": params.get("progress"),
                "total": params.get("total"),
                "message": params.get("message"),
            }
    return None


def call_context(
    session: McpSession,
    rpc_id: int | str,
    *,
    outcome: dict[str, Any] | None = None,
    sent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build what ``sessions/_call.html`` renders for one request, from the timeline and its outcome.

    ``sent`` (method and params) stands in for the request frame while the recorder has not stored it.
    """
    key = json.dumps(rpc_id)
    if whole(outcome) and sent is not None:
        # The owner's outcome says all the card needs (where its frames sit, verdicts, latency):
        # the request and its answer are not read back from the database.
        return _card(session, rpc_id, sent, outcome, None, None)
    request = (
        TimelineFrame.objects.filter(session=session, direction="out", rpc_kind="request", rpc_id=key)
        .order_by("-seq")
        .first()
    )
    sent = _message(request) or sent or {}
    response = None
    if outcome is None:
        response = (
            TimelineFrame.objects.filter(
                session=session,
                direction="in",
                rpc_id=key,
                rpc_kind__in=("result", "error"),
                seq__gt=request.seq if request else 0,
            )
            .order_by("seq")
            .first()
        )
        outcome = _stored_outcome(session, key, request, response)
    else:
        response = (
            TimelineFrame.objects.filter(
                session=session, direction="in", rpc_id=key, rpc_kind__in=("result", "error")
            )
            .order_by("seq")
            .first()
        )
        if response is not None and response.size > CARD_BYTES:
            outcome = {**outcome, **_too_big(response)}
            outcome.pop("result", None)
        elif int(outcome.get("size") or 0) > CARD_BYTES and outcome.get("response_seq"):
            # Not stored yet: the head comes from the answer the owner passed on.
            head = json.dumps(outcome.get("result", outcome.get("error")), ensure_ascii=False)[:HEAD_CHARS]
            size, seq = int(outcome["size"]), int(outcome["response_seq"])
            outcome = {**outcome, "too_big": {"size": size, "head": head, "seq": seq}}
            outcome.pop("result", None)
            outcome.pop("error", None)
    return _card(session, rpc_id, sent, outcome, request, response)


def _stored_outcome(
    session: McpSession, key: str, request: TimelineFrame | None, response: TimelineFrame | None
) -> dict[str, Any] | None:
    """How a request ended, as its stored frames tell: its answer (or the head of one too big to
    render), cancelled, or cut short by the session's end; None while it runs."""
    if response is not None and response.size > CARD_BYTES:
        return _too_big(response)
    answer = _message(response)
    if "error" in answer:
        return {"error": answer["error"]}
    if "result" in answer:
        return {"result": answer["result"]}
    if (
        request is not None
        and TimelineFrame.objects.filter(
            session=session,
            method="notifications/cancelled",
            direction="out",
            seq__gt=request.seq,
            preview__contains=f'"requestId":{key}',
        ).exists()
    ):
        return {"error": {"code": None, "message": "cancelled or timed out"}}
    if not session.is_live:
        return {"error": {"code": None, "message": "the session ended before a response"}}
    return None


def whole(outcome: dict[str, Any] | None) -> bool:
    """Whether an owner's outcome stands for both frames: its answer was seen, and is small enough
    to render (a bigger one shows the stored frame's head). Its card then reads no frame."""
    return (
        outcome is not None
        and outcome.get("request_seq") is not None
        and outcome.get("response_seq") is not None
        and int(outcome.get("size") or 0) <= CARD_BYTES
    )


def _card(
    session: McpSession,
    rpc_id: int | str,
    sent: dict[str, Any],
    outcome: dict[str, Any] | None,
    request: TimelineFrame | None,
    response: TimelineFrame | None,
) -> dict[str, Any]:
    """The card of a request: its method and params as sent (the stored request, else what the
    owner passed on), how it ended."""
    method = (request.method if request else "") or sent.get("method") or (outcome or {}).get("method", "")
    params = sent.get("params") or {}
    verdict = None
    if method == "tools/call" and outcome and isinstance(outcome.get("result"), dict):
        if response is not None:
            verdict = output_verdict(response.verdicts, response.note)
        else:
            verdict = output_verdict(outcome.get("verdicts") or [], outcome.get("note"))
    return {
        "output_verdict": verdict,
        "session": session,
        "rpc_id": rpc_id,
        "method": method,
        "params": params,
        "arguments_json": json.dumps(
            {k: v for k, v in params.items() if k != "_meta"}, indent=2, ensure_ascii=False
        ),
        "request_seq": request.seq if request else (outcome or {}).get("request_seq"),
        "response_seq": response.seq if response else (outcome or {}).get("response_seq"),
        "latency_ms": response.latency_ms if response else (outcome or {}).get("latency_ms"),
        "outcome": outcome,
        "running": outcome is None,
        # Only a request this inspector sent (a whole-number id) can be cancelled; a recording's may not.
        "cancellable": outcome is None and isinstance(rpc_id, int) and not isinstance(rpc_id, bool),
        "progress": _progress(session, rpc_id, request.seq if request else 0) if outcome is None else None,
    }


def recent_calls(session: McpSession, limit: int = 10) -> list[dict[str, Any]]:
    """Return the person's latest requests (not the automatic ones, nor completion lookups, which a
    form makes as the person types) as call contexts, newest first.

    Each is the card ``call_context`` draws for its id, from three queries for all of them rather than
    a few each: the requests, where the frames of their ids sit (an id used again later names the
    newest request of it, and its answer is the first after it), then the frames the cards show.
    """
    frames = list(
        TimelineFrame.objects.filter(session=session, direction="out", rpc_kind="request")
        .exclude(method__in=NO_CARD)
        .exclude(method__endswith="/list")
        .order_by("-seq")
        .values_list("seq", "rpc_id")[:limit]
    )
    calls: list[tuple[Any, str]] = []  # (rpc_id, its key as call_context writes it), newest first
    for _, stored_id in frames:
        try:
            rpc_id = json.loads(stored_id)
        except ValueError:
            continue  # not an id (a recording's request without one): no card to draw
        calls.append((rpc_id, json.dumps(rpc_id)))
    if not calls:
        return []
    # Every request and answer of these ids since the oldest of the requests, in seq order.
    sites = (
        TimelineFrame.objects.filter(session=session, rpc_id__in={key for _, key in calls})
        .filter(seq__gte=min(seq for seq, _ in frames))
        .filter(Q(direction="out", rpc_kind="request") | Q(direction="in", rpc_kind__in=("result", "error")))
        .order_by("seq")
        .values_list("rpc_id", "seq", "direction")
    )
    newest: dict[str, int] = {}  # key → the seq of its newest request
    answers: dict[str, list[int]] = {}  # key → the seqs of its answers, in order
    for key, seq, direction in sites:
        if direction == "out":
            newest[key] = seq
        else:
            answers.setdefault(key, []).append(seq)
    wanted: dict[str, tuple[int, int | None]] = {  # key → the seqs of its request and its answer
        key: (seq, next((at for at in answers.get(key, ()) if at > seq), None)) for key, seq in newest.items()
    }
    # By seq, the (session, seq) index: by primary key, SQLite would walk the session for the ordering.
    seqs = {seq for pair in wanted.values() for seq in pair if seq is not None}
    shown = {f.seq: f for f in TimelineFrame.objects.filter(session=session, seq__in=seqs).order_by()}
    cards = []
    for rpc_id, key in calls:
        request_seq, response_seq = wanted.get(key, (None, None))
        request = shown.get(request_seq) if request_seq is not None else None
        response = shown.get(response_seq) if response_seq is not None else None
        outcome = _stored_outcome(session, key, request, response)
        cards.append(_card(session, rpc_id, _message(request), outcome, request, response))
    return cards


def output_verdict(verdicts: list[Any], note: str | None) -> dict[str, Any] | None:
    """What the engine judged of a tools/call result against the tool's outputSchema (the verdicts
    and note of the result's frame); None when it had no schema to hold the result to."""
    for verdict in verdicts:
        if isinstance(verdict, dict) and verdict.get("code") in OUTPUT_CODES:
            return {"ok": False, "message": str(verdict.get("message", ""))}
    if note == OUTPUT_MATCHES:
        return {"ok": True, "message": "matches outputSchema"}
    return None
