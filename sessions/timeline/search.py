"""Search every frame of every session a person owns, with a small query language.

    method:tools/call status:error rule:unknown-id dir:in server:everything latency:>100 some words

``method:`` is a prefix; ``status:`` is ``error`` (error responses, ``isError`` results, stderr, exits)
or ``violation`` (a verdict of error or warning severity); ``rule:`` a verdict code; ``dir:`` ``in`` or
``out``; ``server:`` part of the server's or the session's name; ``latency:>N`` / ``latency:<N`` in ms;
other words must all appear in the frame's preview or note. The newest matches come first, and the
latency of each method is summed up over the matches.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from sessions.frames import SUMMARY_FIELDS
from sessions.models import TimelineFrame
from sessions.timeline.conformance import summarize_latency
from sessions.timeline.queries import RULE, TimelineFilter

SHOWN = 100
COUNTED = 10_000
SUMMED = 20_000
KEYS = ("method", "status", "rule", "dir", "server", "latency")
_LATENCY = re.compile(r"([<>])(\d+(?:\.\d+)?)")


@dataclass
class Query:
    text: str
    terms: dict[str, str] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Query:
        query = cls(text.strip()[:500])
        try:
            tokens = shlex.split(query.text)
        except ValueError:
            tokens = query.text.split()
        for token in tokens:
            key, sep, value = token.partition(":")
            if sep and key in KEYS and value:
                query.terms[key] = value
            else:
                query.words.append(token)
        status = query.terms.get("status")
        if status is not None and status not in ("error", "violation"):
            query.problems.append(f"status:{status} — use status:error or status:violation")
        if "rule" in query.terms and not RULE.fullmatch(query.terms["rule"]):
            query.problems.append(f"rule:{query.terms['rule']} is not a rule code")
        if query.terms.get("dir") not in (None, "in", "out"):
            query.problems.append("dir: is in or out")
        if "latency" in query.terms and not _LATENCY.fullmatch(query.terms["latency"]):
            query.problems.append("latency: needs > or < and milliseconds, e.g. latency:>100")
        return query

    def frames(self, owner: User) -> QuerySet[TimelineFrame]:
        terms = self.terms
        # What the timeline's own filter knows (method, direction, errors, violations, rule) it applies;
        # parse() has already refused a bad direction or rule.
        timeline = TimelineFilter(
            method=terms.get("method", ""),
            direction=terms.get("dir", ""),
            errors=terms.get("status") == "error",
            violations=terms.get("status") == "violation",
            rule=terms.get("rule", ""),
        )
        rows = timeline.apply(TimelineFrame.objects.filter(session__owner=owner))
        if "server" in terms:
            rows = rows.filter(
                Q(session__server_info__name__icontains=terms["server"])
                | Q(session__name__icontains=terms["server"])
            )
        latency = _LATENCY.fullmatch(terms.get("latency", ""))
        if latency:
            bound = float(latency[2])
            rows = (
                rows.filter(latency_ms__gt=bound) if latency[1] == ">" else rows.filter(latency_ms__lt=bound)
            )
        for word in self.words:
            rows = rows.filter(Q(preview__icontains=word) | Q(note__icontains=word))
        return rows


def results(owner: User, text: str) -> dict[str, Any]:
    """What the search page shows for ``text``."""
    query = Query.parse(text)
    if not query.text or query.problems:
        return {"query": query, "rows": [], "count": 0, "latency_rows": []}
    rows = query.frames(owner)
    shown = list(
        rows.select_related("session")
        .only(*SUMMARY_FIELDS, "session__public_id", "session__name", "session__server_info")
        .order_by("-pk")[:SHOWN]
    )
    count = rows.order_by()[:COUNTED].count()
    answers = list(
        rows.filter(direction="in", latency_ms__isnull=False)
        .order_by("-pk")
        .values_list("method", "latency_ms", "rpc_kind")[:SUMMED]
    )
    return {
        "query": query,
        "rows": shown,
        "count": count,
        "count_capped": count == COUNTED,
        "latency_rows": summarize_latency(answers),
    }
