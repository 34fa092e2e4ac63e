"""Search every frame of every session a person owns, with a small query language.

    method:tools/call status:error rule:unknown-id dir:in server:everything latency:>100 some words
    (method:tools/call OR method:resources/read) "exact phrase"

``method:`` is a prefix; ``status:`` is ``error`` (error responses, ``isError`` results, stderr, exits)
or ``violation`` (a verdict of error or warning severity); ``rule:`` a verdict code; ``dir:`` ``in`` or
``out``; ``server:`` part of the server's or the session's name; ``latency:>N`` / ``latency:<N`` in ms.
Other words are searched for in the whole frame (sessions/timeline/fulltext.py): a word matches the
words it begins, a quoted phrase those words in order. Terms side by side must all match; ``OR``
between two terms (or parenthesized groups) needs either. A query that cannot be read is refused
with the reason, never answered with nothing. The newest matches come first, and the latency of each
method is summed up over the matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from sessions.frames import SUMMARY_FIELDS
from sessions.models import McpSession, TimelineFrame
from sessions.timeline import fulltext
from sessions.timeline.conformance import summarize_latency
from sessions.timeline.queries import RULE

SHOWN = 100
COUNTED = 10_000
SUMMED = 20_000
MAX_LENGTH = 500
MAX_TERMS = 20
KEYS = ("method", "status", "rule", "dir", "server", "latency")
_LATENCY = re.compile(r"([<>])(\d+(?:\.\d+)?)")
_FIELD = re.compile(r"([A-Za-z]+):(.*)", re.S)
# A token: "(", ")", a "quoted phrase", or a bare word, which may be a field: with a "quoted value".
_TOKEN = re.compile(r'\s*(?:(\()|(\))|"([^"]*)("?)|([^\s()"]+)(?:(?<=:)"([^"]*)("?))?)')


class QueryError(ValueError):
    """What is wrong with a query, said so a person can fix it."""


@dataclass(frozen=True)
class Term:
    key: str  # a field, or "" for text
    value: str
    quoted: bool = False


@dataclass(frozen=True)
class Group:
    op: str  # "and" or "or"
    parts: tuple[Term | Group, ...]


def _tokens(text: str) -> list[str | Term]:
    """Split a query into "(", ")", "OR" and terms; a quote left open is an error."""
    tokens: list[str | Term] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        match = _TOKEN.match(text, pos)
        assert match is not None  # every character starts one of the alternatives
        opening, closing, phrase, phrase_end, bare, value, value_end = match.groups()
        pos = match.end()
        if opening or closing:
            tokens.append(opening or closing)
        elif phrase is not None:
            if not phrase_end:
                raise QueryError(f'the quote before "{phrase[:40]} is never closed: add a " after the phrase')
            tokens.append(Term("", phrase, quoted=True))
        elif value is not None:
            if not value_end:
                raise QueryError(f'the quote after {bare}" is never closed: add a " after the value')
            tokens.append(_term(bare + value, quoted=True))
        elif bare in ("OR", "AND"):
            tokens.append(bare)
        else:
            tokens.append(_term(bare))
    return tokens


def _term(token: str, quoted: bool = False) -> Term:
    found = _FIELD.fullmatch(token)
    if found is None or (not quoted and found[2].startswith("/")):  # a URL is text
        return Term("", token)
    key, value = found[1].lower(), found[2]
    if key not in KEYS:
        raise QueryError(
            f"{found[1]}: is not a field (fields: {', '.join(k + ':' for k in KEYS)}); "
            f'to search for the text, put it in quotes: "{token}"'
        )
    if not value:
        raise QueryError(f"{key}: needs a value, e.g. {key}:{_EXAMPLES[key]}")
    if key == "status" and value not in ("error", "violation"):
        raise QueryError(f"status:{value} — use status:error or status:violation")
    if key == "rule" and not RULE.fullmatch(value):
        raise QueryError(f"rule:{value} is not a rule code")
    if key == "dir" and value not in ("in", "out"):
        raise QueryError(f"dir:{value} — dir: is in or out")
    if key == "latency" and not _LATENCY.fullmatch(value):
        raise QueryError(f"latency:{value} — latency: needs > or < and milliseconds, e.g. latency:>100")
    return Term(key, value, quoted)


_EXAMPLES = {
    "method": "tools/call",
    "status": "error",
    "rule": "unknown-id",
    "dir": "in",
    "server": "everything",
    "latency": ">100",
}


class _Parser:
    """query := all (OR all)* ; all := one+ ; one := ( query ) | term"""

    def __init__(self, tokens: list[str | Term]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self) -> str | Term | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def parse(self) -> Term | Group:
        node = self.either()
        if self.peek() == ")":
            raise QueryError("a ) has no ( before it")
        return node

    def either(self) -> Term | Group:
        parts = [self.all()]
        while self.peek() == "OR":
            self.pos += 1
            parts.append(self.all())
        return parts[0] if len(parts) == 1 else Group("or", tuple(parts))

    def all(self) -> Term | Group:
        parts: list[Term | Group] = []
        while (token := self.peek()) not in (None, ")", "OR"):
            self.pos += 1
            if token == "AND":
                continue
            if token == "(":
                if self.peek() == ")":
                    raise QueryError("() is empty: put terms inside the parentheses")
                self.depth += 1
                parts.append(self.either())
                self.depth -= 1
                if self.peek() != ")":
                    raise QueryError("a ( is never closed: add a )")
                self.pos += 1
            else:
                assert isinstance(token, Term)
                parts.append(token)
        if not parts:
            if self.peek() == ")" and not self.depth:
                raise QueryError("a ) has no ( before it")
            raise QueryError("OR needs a term on each side")
        return parts[0] if len(parts) == 1 else Group("and", tuple(parts))


def _terms(node: Term | Group) -> list[Term]:
    return [node] if isinstance(node, Term) else [t for part in node.parts for t in _terms(part)]


@dataclass
class Query:
    text: str
    tree: Term | Group | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Query:
        query = cls(text.strip())
        try:
            if "\x00" in query.text:
                raise QueryError("the query holds a NUL character: search for printable text")
            if len(query.text) > MAX_LENGTH:
                raise QueryError(f"the query is {len(query.text)} characters long; at most {MAX_LENGTH}")
            tokens = _tokens(query.text)
            if tokens:
                query.tree = _Parser(tokens).parse()
                terms = _terms(query.tree)
                if len(terms) > MAX_TERMS:
                    raise QueryError(f"the query has {len(terms)} terms; at most {MAX_TERMS}")
                for term in terms:
                    if not term.key and not any(c.isalnum() for c in term.value):
                        raise QueryError(
                            f"{term.value!r} has no letters or digits: the search looks for words"
                        )
        except QueryError as exc:
            query.tree = None
            query.problems.append(str(exc))
        return query

    def frames(self, sessions: QuerySet[McpSession]) -> QuerySet[TimelineFrame]:
        """The frames of ``sessions`` (the person's team's) that match."""
        rows = TimelineFrame.objects.filter(session__in=sessions.values("pk"))
        return rows.filter(_condition(self.tree)) if self.tree is not None else rows.none()


def _condition(node: Term | Group) -> Q:
    if isinstance(node, Group):
        parts = [_condition(part) for part in node.parts]
        combined = parts[0]
        for part in parts[1:]:
            combined = combined | part if node.op == "or" else combined & part
        return combined
    key, value = node.key, node.value
    if not key:
        return fulltext.matches(value, phrase=node.quoted)
    if key == "method":
        return Q(method__startswith=value)
    if key == "dir":
        return Q(direction=value)
    if key == "status":
        return Q(is_error=True) if value == "error" else Q(worst__in=("error", "warning"))
    if key == "rule":
        # The code in quotes inside the stored verdicts (JSON text on SQLite, jsonb on PostgreSQL).
        return ~Q(worst="") & Q(verdicts__icontains=f'"{value}"')
    if key == "server":
        return Q(session__server_info__name__icontains=value) | Q(session__name__icontains=value)
    latency = _LATENCY.fullmatch(value)
    assert latency is not None  # parse() refused the rest
    bound = float(latency[2])
    return Q(latency_ms__gt=bound) if latency[1] == ">" else Q(latency_ms__lt=bound)


# What a row's session label reads (sessions.web.labels): loaded with the row, not one query a row.
LABEL_FIELDS = ("public_id", "name", "server_info", "created", "status", "config", "transport_name")


def results(sessions: QuerySet[McpSession], text: str) -> dict[str, Any]:
    """What the search page shows for ``text``, searching the frames of ``sessions``."""
    query = Query.parse(text)
    if query.tree is None:
        return {"query": query, "rows": [], "count": 0, "latency_rows": []}
    fulltext.catch_up()
    rows = query.frames(sessions)
    shown = list(
        rows.select_related("session")
        .only(*SUMMARY_FIELDS, *(f"session__{name}" for name in LABEL_FIELDS))
        .order_by("-pk")[:SHOWN]
    )
    count = rows.order_by()[:COUNTED].count()
    answers = list(
        rows.filter(direction="in", latency_ms__isnull=False)
        .order_by("-pk")
        .values_list("method", "latency_ms", "is_error")[:SUMMED]
    )
    return {
        "query": query,
        "rows": shown,
        "count": count,
        "count_capped": count == COUNTED,
        "latency_rows": summarize_latency(answers),
    }
