"""Reading a session's timeline: filters that work the same on stored rows and on live batches."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db import connections
from django.db.models import Count, QuerySet

from sessions.engine import APP_MESSAGE_STATE
from sessions.frames import SUMMARY_FIELDS, message_of, pretty_json
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Note

__all__ = [
    "PAGE",
    "RULE",
    "TimelineFilter",
    "detail_of",
    "frame_detail",
    "page_of_rows",
    "replay_of",
    "request_of",
    "union_all",
]

PAGE = 200
RULE = re.compile(r"[a-z0-9][a-z0-9-]{0,59}")  # a verdict code, as docs/engine.md lists them


@dataclass(frozen=True)
class TimelineFilter:
    """What a viewer asked to see: a method prefix, a direction, only errors, only violations, one rule."""

    method: str = ""
    direction: str = ""
    errors: bool = False
    violations: bool = False
    hide_http: bool = False
    apps: bool = False  # only the messages between an MCP Apps view and its host
    rule: str = ""

    @classmethod
    def from_data(cls, data: Any) -> TimelineFilter:
        def flag(name: str) -> bool:
            value = data.get(name)
            return value not in (None, "", "0", "false", "off", False)

        direction = str(data.get("direction") or "")
        rule = str(data.get("rule") or "").strip().lower()
        return cls(
            rule=rule if RULE.fullmatch(rule) else "",
            method=str(data.get("method") or "").strip()[:200],
            direction=direction if direction in ("in", "out") else "",
            errors=flag("errors"),
            violations=flag("violations"),
            hide_http=flag("hide_http"),
            apps=flag("apps"),
        )

    @property
    def active(self) -> bool:
        return self != TimelineFilter()

    def as_query(self) -> str:
        fields = {k: v for k, v in self.__dict__.items() if v}
        return urlencode({k: ("1" if v is True else v) for k, v in fields.items()})

    def apply(self, rows: QuerySet[TimelineFrame]) -> QuerySet[TimelineFrame]:
        if self.method:
            rows = rows.filter(method__startswith=self.method)
        if self.direction:
            rows = rows.filter(direction=self.direction)
        if self.errors:
            rows = rows.filter(is_error=True)
        if self.violations:
            rows = rows.filter(worst__in=("error", "warning"))
        if self.hide_http:
            rows = rows.exclude(kind="http")
        if self.apps:
            rows = rows.filter(kind="state", transport__state=APP_MESSAGE_STATE)
        if self.rule:
            # The code in quotes inside the stored verdicts (JSON text on SQLite, jsonb on PostgreSQL).
            rows = rows.exclude(worst="").filter(verdicts__icontains=f'"{self.rule}"')
        return rows

    def matches(self, row: dict[str, Any]) -> bool:
        if self.method and not row["method"].startswith(self.method):
            return False
        if self.direction and row["direction"] != self.direction:
            return False
        if self.errors and not row["is_error"]:
            return False
        if self.violations and row["worst"] not in ("error", "warning"):
            return False
        if self.rule and not any(v.get("code") == self.rule for v in row["verdicts"] or ()):
            return False
        if self.apps and not _is_app_message(row):
            return False
        return not (self.hide_http and row["kind"] == "http")


def _is_app_message(row: dict[str, Any]) -> bool:
    transport = row.get("transport")
    return (
        row["kind"] == "state" and isinstance(transport, dict) and transport.get("state") == APP_MESSAGE_STATE
    )


def page_of_rows(
    session: McpSession,
    flt: TimelineFilter,
    *,
    before: int | None = None,
    after: int | None = None,
    limit: int = PAGE,
    frames: QuerySet[TimelineFrame] | None = None,
) -> list[dict[str, Any]]:
    """Return up to ``limit`` rows in seq order: the newest, the ones before a seq, or after one.

    ``frames``: among these of the session's frames only (a share's scope).
    """
    if frames is None:
        frames = TimelineFrame.objects.filter(session=session)
    rows = flt.apply(frames)
    if after is not None:
        found = list(rows.filter(seq__gt=after).order_by("seq").values(*SUMMARY_FIELDS)[:limit])
    else:
        if before is not None:
            rows = rows.filter(seq__lt=before)
        found = list(rows.order_by("-seq").values(*SUMMARY_FIELDS)[:limit])
        found.reverse()
    _count_notes(session, found)
    return found


def _count_notes(session: McpSession, rows: list[dict[str, Any]]) -> None:
    """Add each row's number of notes (``teams.Note``), for the timeline's marker."""
    if not rows:
        return
    counts = dict(
        Note.objects.filter(session=session, frame_seq__gte=rows[0]["seq"], frame_seq__lte=rows[-1]["seq"])
        .values("frame_seq")
        .annotate(n=Count("pk"))
        .values_list("frame_seq", "n")
    )
    for row in rows:
        row["notes"] = counts.get(row["seq"], 0)


# Requests the lifecycle owns: sending them again by hand would confuse the session, not test the server.
NOT_REPLAYED = frozenset({"initialize", "server/discover", "subscriptions/listen"})
# What the engine puts into a request itself (and puts in afresh when it is sent again).
ENGINE_META = ("progressToken", "io.modelcontextprotocol/")
ROUND_FIELDS = ("inputResponses", "requestState")  # a stateless retry's answers belong to that round


def request_of(frame: TimelineFrame, raw: bytes) -> tuple[str, dict[str, Any] | None] | None:
    """The method and params a person sent in an outgoing request, without what the engine added
    (ids, progress tokens, the stateless stamps, a retry's answers); ``None`` if it is not one."""
    if frame.direction != "out" or frame.rpc_kind != "request" or frame.method in NOT_REPLAYED:
        return None
    message = message_of(raw)
    if not isinstance(message.get("method"), str):
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return message["method"], None
    params = {k: v for k, v in params.items() if k not in ROUND_FIELDS}
    meta = params.pop("_meta", None)
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if not k.startswith(ENGINE_META)}
        if kept:
            params["_meta"] = kept
    return message["method"], params or None


def replay_of(frame: TimelineFrame, raw: bytes) -> dict[str, str] | None:
    """The method and params to send an outgoing request again with, or ``None`` if it is not one."""
    request = request_of(frame, raw)
    if request is None:
        return None
    method, params = request
    return {"method": method, "params": json.dumps(params, indent=2, ensure_ascii=False) if params else ""}


def frame_detail(session: McpSession, seq: int) -> dict[str, Any] | None:
    """Return one frame with its raw bytes, pretty JSON and its pair."""
    frame = TimelineFrame.objects.filter(session=session, seq=seq).first()
    return None if frame is None else detail_of(frame)


def detail_of(frame: TimelineFrame, *, replay: bool = True) -> dict[str, Any]:
    """What the frame detail shows of a frame: raw bytes, pretty JSON, what to send again."""
    raw = bytes(frame.raw)
    pretty = pretty_json(raw)
    text = raw.decode("utf-8", errors="replace")
    return {
        "replay": replay_of(frame, raw) if replay else None,
        "frame": frame,
        "text": text[:1_000_000],
        "truncated": len(text) > 1_000_000,
        "pretty": pretty[:1_000_000],
        "hex": raw[:512].hex(" ") if frame.parse_error else "",
    }


def union_all(query: QuerySet[Any], stand_ins: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[Any]:
    """The rows of ``query`` run once per row of values, in one statement (``UNION ALL``): each copy
    with a row's values in place of ``stand_ins``, parameters that compile into one slot each.

    Building a query through the ORM costs more than running it over an index range; built once, its
    copies differ only in their parameters.
    """
    sql, params = query.query.sql_with_params()
    slots = [[i for i, p in enumerate(params) if p == stand_in] for stand_in in stand_ins]
    if any(len(at) != 1 for at in slots):
        raise RuntimeError(f"the stand-ins did not compile into one parameter each: {sql}")
    values: list[Any] = []
    for row in rows:
        own = list(params)
        for (at,), value in zip(slots, row, strict=True):
            own[at] = value
        values += own
    if not rows:
        return []
    with connections[query.db].cursor() as cursor:
        cursor.execute(" UNION ALL ".join([sql] * len(rows)), values)
        return list(cursor.fetchall())
