"""The Conformance report: every verdict of a session counted by rule, and latency by method.

"Is my server correct?" in one screen: which rules it broke, how often, where first (a click opens
that frame), with an example; and how fast each method answers (p50, p95, max), with its errors. In
a tap session the client's frames are judged too: each rule says which side broke it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from django.db import connections
from django.db.models import Count, F, Max, Q, Value
from django.db.models.functions import Coalesce, NullIf

from sessions.engine import side_of
from sessions.frames import SEVERITY_ORDER
from sessions.models import McpSession, TimelineFrame

# A report covers a session's frames, or some of them (a share's scope): a queryset of TimelineFrame.
Frames = Any

SCAN = 50_000  # newest flagged frames, and newest answered requests, looked at


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def _frames(session: McpSession, frames: Frames | None) -> Frames:
    return TimelineFrame.objects.filter(session=session) if frames is None else frames


def verdict_rows(session: McpSession, frames: Frames | None = None) -> tuple[list[dict[str, Any]], bool]:
    """One row per rule code: the side that broke it, severity, count, first frame, an example; and
    whether the scan was capped."""
    flagged = list(
        _frames(session, frames).exclude(worst="").order_by("-seq").values_list("seq", "verdicts")[:SCAN]
    )
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for seq, verdicts in reversed(flagged):
        for verdict in verdicts if isinstance(verdicts, list) else []:
            if not isinstance(verdict, dict):
                continue
            key = (str(verdict.get("code", "?")), str(verdict.get("severity", "info")))
            row = rows.get(key)
            if row is None:
                rows[key] = {
                    "code": key[0],
                    "side": side_of(key[0]),
                    "severity": key[1],
                    "count": 1,
                    "first_seq": seq,
                    "last_seq": seq,
                    "example": str(verdict.get("message", "")),
                }
            else:
                row["count"] += 1
                row["last_seq"] = seq
    ordered = sorted(
        rows.values(), key=lambda r: (SEVERITY_ORDER.get(r["severity"], 3), -r["count"], r["code"])
    )
    return ordered, len(flagged) == SCAN


def summarize_latency(answers: list[tuple[str, float | None, bool]]) -> list[dict[str, Any]]:
    """Per method, from (method, latency_ms, is_error) of answers: calls, errors, p50, p95, max.

    An error is an error response or a result with ``isError`` (the frame's ``is_error`` column): a
    tool call that failed counts as one, however it was reported.
    """
    by_method: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for method, latency, is_error in answers:
        by_method[method or "?"].append(latency or 0.0)
        if is_error:
            errors[method or "?"] += 1
    rows: list[dict[str, Any]] = []
    for method, values in by_method.items():
        values.sort()
        rows.append(
            {
                "method": method,
                "calls": len(values),
                "errors": errors[method],
                "p50": percentile(values, 0.5),
                "p95": percentile(values, 0.95),
                "max": values[-1],
            }
        )
    rows.sort(key=lambda r: (-r["calls"], r["method"]))
    return rows


def latency_rows(session: McpSession, frames: Frames | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Per method answered by the server: calls, errors, p50, p95 and max latency in ms, over the
    newest ``SCAN`` answers; and whether there were that many.

    What ``summarize_latency`` makes of those answers, worked out by the database from the
    ``frame_answer`` index: a row per method, then the answers at each method's p50 and p95 rank;
    never a row per answer.
    """
    answers = _frames(session, frames).filter(direction="in", latency_ms__isnull=False).order_by()
    key: Any = F("method")
    methods = _per_method(answers, key)
    total = sum(row["calls"] for row in methods)
    if total > SCAN:
        oldest = answers.order_by("-seq").values_list("seq", flat=True)[SCAN - 1]
        answers = answers.filter(seq__gte=oldest)
        methods = _per_method(answers, key)
    merged = {"", "?"} <= {row["method"] for row in methods}
    if merged:
        key = Coalesce(NullIf(F("method"), Value("")), Value("?"))  # one method, as summarize_latency has it
        methods = _per_method(answers, key)
    ranks = {
        row["method"]: (max(1, math.ceil(0.5 * row["calls"])), max(1, math.ceil(0.95 * row["calls"])))
        for row in methods
    }
    at = _at_ranks(answers, ranks, merged=merged)
    rows = [
        {
            "method": row["method"] or "?",
            "calls": row["calls"],
            "errors": row["errors"],
            "p50": at[row["method"], ranks[row["method"]][0]],
            "p95": at[row["method"], ranks[row["method"]][1]],
            "max": row["max"],
        }
        for row in methods
    ]
    rows.sort(key=lambda r: (-r["calls"], r["method"]))
    return rows, total >= SCAN


def _at_ranks(
    answers: Frames, ranks: dict[str, tuple[int, int]], *, merged: bool
) -> dict[tuple[str, int], float]:
    """Each method's latency at its ranks (1: the fastest), in one statement: a method's answers in
    latency order from the ``frame_answer`` index, skipped to the rank (``LIMIT 1 OFFSET``), a part
    a rank, ``UNION ALL``. ``merged``: "?" stands for the answers without a method too.

    A part is compiled once, with stand-ins for its method and its offset replaced part by part."""

    def compiled(own: Frames) -> tuple[str, list[Any]]:
        ordered = own.order_by("latency_ms").values_list("latency_ms")[_OFFSET : _OFFSET + 1]
        sql, params = ordered.query.sql_with_params()
        if sql.count(f"OFFSET {_OFFSET}") != 1 or any(p == _OFFSET for p in params):
            raise RuntimeError(f"the latency ranks did not compile as expected: {sql}")
        return sql, list(params)

    one_sql, one_params = compiled(answers.filter(method=_METHOD))
    at = [i for i, p in enumerate(one_params) if p == _METHOD]
    if len(at) != 1:
        raise RuntimeError(f"the latency ranks did not compile as expected: {one_sql}")
    parts: list[str] = []
    values: list[Any] = []
    wanted: list[tuple[str, int]] = []
    for method, pair in ranks.items():
        if merged and method == "?":
            sql, params = compiled(answers.filter(method__in=("", "?")))
        else:
            sql, params = one_sql, list(one_params)
            params[at[0]] = method
        for rank in sorted(set(pair)):
            own = sql.replace(f"OFFSET {_OFFSET}", f"OFFSET {int(rank) - 1}")
            parts.append(f"SELECT {len(wanted)} AS part, r.* FROM ({own}) r")
            values += params
            wanted.append((method, rank))
    if not parts:
        return {}
    with connections[answers.db].cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), values)
        return {wanted[part]: ms for part, ms in cursor.fetchall()}


# Stand-ins in the compiled rank query: a method no server names, an offset no method reaches.
_METHOD, _OFFSET = "\x00rank stand-in", 987_654_321


def _per_method(answers: Frames, key: Any) -> list[dict[str, Any]]:
    """Answers, errors and the longest latency per method (one grouped query)."""
    grouped = (
        answers.annotate(key=key)
        .values("key")
        .annotate(calls=Count("pk"), errors=Count("pk", filter=Q(is_error=True)), longest=Max("latency_ms"))
        .values_list("key", "calls", "errors", "longest")
    )
    return [{"method": m, "calls": n, "errors": e, "max": top} for m, n, e, top in grouped]


def report(session: McpSession, frames: Frames | None = None) -> dict[str, Any]:
    """Everything the Conformance tab (and the HTML export) shows: rules broken, latency by method.

    ``frames``: only these of the session's frames (a share's scope); all of them by default.
    """
    verdicts, verdicts_capped = verdict_rows(session, frames)
    latency, latency_capped = latency_rows(session, frames)
    totals: dict[str, int] = defaultdict(int)
    for row in verdicts:
        totals[row["severity"]] += row["count"]
    return {
        "verdict_rows": verdicts,
        "verdicts_capped": verdicts_capped,
        "verdict_totals": [
            (s, totals[s], s if totals[s] == 1 or s == "info" else f"{s}s")
            for s in ("error", "warning", "info")
        ],
        "latency_rows": latency,
        "latency_capped": latency_capped,
        "scan": SCAN,
    }
