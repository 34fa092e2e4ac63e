"""A session's secrets in every common encoding, found by one regular expression.

A secret reaches a frame as it is, JSON-escaped, URL-encoded (``%20`` or ``+`` for a space, any
reserved character percent-encoded, upper or lower hex), upper- or lower-cased, in base64 (standard or
URL-safe, padded or not, at any offset inside a longer base64 text) or in hex. Each encoding is a
``Form``: a run of positions, each of which may be written in a few ways; a position matches any of
its ways, so mixed spellings (a URL-encoded, upper-cased secret inside JSON text) are found too.

Case: the raw, JSON and URL forms match whatever the case of each letter. A secret told apart from
another by case alone is rare; a secret upper- or lower-cased by a server (a header, a hex or base32
token, a log that shouts) is no less a secret, and over-masking a share is the safe way to be wrong.
Base64 is matched as written (its case carries bits); hex whatever its case.

Base64 at any offset: the secret's bytes can start at a byte offset of 0, 1 or 2 modulo 3 within the
encoded stream; for each, the characters whose six bits all come from the secret are fixed, whatever
comes before or after (``fragment``). Any base64 text that holds the secret holds one of those three
fragments. The characters on either side, which carry a few of the secret's bits and a few of the
neighbours', are masked with it where they are there.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sessions.timeline.secret_rules import MIN_SECRET

__all__ = ["Form", "SecretForms", "forms_of"]

# Base64 characters as they may be written: URL-safe, percent-encoded, JSON-escaped.
_B64_WAYS = {"+": ("+", "-", "%2B", "%2b"), "/": ("/", "_", "%2F", "%2f", "\\/")}
_PADDING = ("=", "%3D", "%3d")
# Anchors shorter than this let too much text through to be worth looking for.
MIN_ANCHOR = 3
# The opening of a secret a frame may end with, its rest to come in the next frame: at least MIN_PIECE
# characters (fewer would mask the end of many a line, and tell little), looked at up to OPENING.
MIN_PIECE, OPENING = 4, 48


@dataclass(frozen=True)
class Position:
    """One character of an encoded secret: the ways it may be written, ``least`` to ``most`` times."""

    ways: frozenset[str]
    least: int = 1
    most: int = 1


@dataclass(frozen=True)
class Form:
    """A secret in one encoding."""

    positions: tuple[Position, ...]

    def pattern(self, written: bool) -> str:
        """A regular expression for the form; ``written``: also as it stands inside a JSON string."""
        return "".join(_piece(p, written) for p in self.positions)

    def anchor(self) -> tuple[str, int, int]:
        """The longest run of characters every match holds, lower-cased (text without it has no match),
        and how far a match reaches before it and after it, at most, in characters."""
        best, best_at, run = "", 0, ""
        for i, position in enumerate(self.positions):
            lowered = {way.lower() for way in position.ways}
            single = next(iter(lowered)) if len(lowered) == 1 and position.least == 1 else ""
            if len(single) == 1 and single.isascii() and single.isalnum():
                run += single
                if len(run) > len(best):
                    best, best_at = run, i + 1 - len(run)
            else:
                run = ""
        widths = [max(map(len, p.ways)) * p.most for p in self.positions]
        return best, sum(widths[:best_at]), sum(widths[best_at + len(best) :])

    def longest(self) -> int:
        """The most characters a match of ``pattern(written=False)`` spans."""
        return sum(max(map(len, p.ways)) * p.most for p in self.positions)

    def opening(self, least: int, most: int) -> str:
        """A regular expression for the form's first ``least`` to ``most`` positions: the piece of it a
        frame ends with when the rest is still to come."""
        pieces = [_piece(p, False) for p in self.positions[:most]]
        rest = ""
        for piece in reversed(pieces[least:]):
            rest = f"(?:{piece}{rest})?"
        return "".join(pieces[:least]) + rest


def _piece(position: Position, written: bool) -> str:
    ways = set(position.ways)
    if written:
        ways |= {_json(way, ascii) for way in position.ways for ascii in (True, False)}
    if all(len(way) == 1 for way in ways):
        body = (
            "[" + "".join(sorted(re.escape(way) for way in ways)) + "]" if len(ways) > 1 else re.escape(*ways)
        )
    else:
        body = "(?:" + "|".join(re.escape(w) for w in sorted(ways, key=lambda w: (-len(w), w))) + ")"
    if (position.least, position.most) == (1, 1):
        return body
    if (position.least, position.most) == (0, 1):
        return body + "?"
    return f"{body}{{{position.least},{position.most}}}"


def _json(text: str, ascii: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii)[1:-1]


def _cases(char: str) -> set[str]:
    return {c for c in (char, char.lower(), char.upper()) if len(c) == 1}


def _percent(char: str) -> set[str]:
    """``char`` percent-encoded (its UTF-8 bytes), in upper and lower hex."""
    upper = "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return {upper, upper.lower()}


def _text_position(char: str) -> Position:
    """A character of the secret as text may write it: any case, JSON-escaped, percent-encoded."""
    if char.isascii() and char.isalnum():
        return Position(frozenset(_cases(char)))
    ways: set[str] = set()
    for variant in _cases(char):
        ways |= {variant, _json(variant, True), _json(variant, False), *_percent(variant)}
        escaped = _json(variant, True)
        if escaped.startswith("\\u"):
            ways.add(escaped.upper().replace("\\U", "\\u"))
    if char == " ":
        ways.add("+")
    if char == "/":
        ways.add("\\/")
    return Position(frozenset(ways))


def text_form(secret: str) -> Form:
    """The secret as it is, JSON-escaped, URL-encoded, in any case (and any mix of these)."""
    return Form(tuple(_text_position(c) for c in secret))


def hex_form(data: bytes) -> Form:
    return Form(tuple(Position(frozenset(_cases(c))) for c in data.hex()))


def _b64_ways(chars: Iterable[str]) -> frozenset[str]:
    ways: set[str] = set()
    for char in chars:
        ways.update(_B64_WAYS.get(char, (char,)))
    return frozenset(ways)


def _b64(data: bytes) -> str:
    """``data`` in base64, followed by zeros to fill the last characters (none is padding)."""
    return base64.b64encode(data + bytes(3)).decode()


def fragment(data: bytes, offset: int) -> Form:
    """The base64 characters fixed by ``data`` when it starts ``offset`` (0, 1, 2) bytes into a group
    of three, with the characters it shares with its neighbours on either side (optional)."""
    start_bit, end_bit = 8 * offset, 8 * (offset + len(data))
    first, last = -(-start_bit // 6), end_bit // 6  # the characters [first, last) are the data's alone
    encoded = _b64(bytes(offset) + data)
    positions = [Position(_b64_ways(encoded[i])) for i in range(first, last)]
    if start_bit % 6:  # the character before holds the data's first bits and the neighbour's last
        leads = {_b64(bytes(offset - 1) + bytes([byte]) + data)[first - 1] for byte in range(256)}
        positions.insert(0, Position(_b64_ways(leads), least=0))
    if end_bit % 6:  # the character after: the data's last bits and the next byte's first
        after = {_b64(bytes(offset) + data + bytes([byte]))[last] for byte in range(256)}
        positions.append(Position(_b64_ways(after), least=0))
        positions.append(Position(frozenset(_PADDING), least=0, most=2))
    return Form(tuple(positions))


def forms_of(secret: str) -> list[Form]:
    """Every encoding of ``secret`` looked for."""
    data = secret.encode("utf-8", "surrogatepass")
    return [text_form(secret), hex_form(data), *(fragment(data, offset) for offset in range(3))]


@dataclass(frozen=True)
class _Group:
    """The forms that hold one anchor: their expressions, and how far a match reaches around it."""

    anchor: str
    pattern: re.Pattern[str]
    written: re.Pattern[str]
    before: int
    after: int


class SecretForms:
    """Every form of a session's secrets: one regular expression for text (``pattern``), one for text as
    written inside JSON (``Redactor.plain``), and what every match of each holds (its anchor).

    The expression is not run over whole texts: alternatives that start with nearly any letter would
    make it try each of them at nearly every character. Each form is looked for only around its anchor,
    where found, by the expression of the forms holding that anchor (``_candidates``); what they find is
    what ``pattern`` finds, or, where two finds overlap, ``pattern`` decides there (``matches``).
    """

    @classmethod
    def of(cls, secrets: list[str], encodings: bool = True) -> SecretForms:
        """The forms of these secrets, made once for every view and export of a session (they keep no
        state of their own: making them takes milliseconds, a page of a share less)."""
        return _made(tuple(sorted(set(secrets))), encodings)

    def __init__(self, secrets: list[str], encodings: bool = True) -> None:
        forms: list[Form] = []
        secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)
        for secret in secrets:
            forms += forms_of(secret) if encodings else _literal(secret)
        # Longest first: a secret that contains another is masked whole.
        order = sorted({form.pattern(False): form for form in forms}.items(), key=lambda f: -len(f[0]))
        self.pattern = re.compile("|".join(p for p, _ in order)) if order else None
        self.written = re.compile("|".join(f.pattern(True) for _, f in order)) if order else None
        by_anchor: dict[str, list[Form]] = {}
        for _, form in order:
            by_anchor.setdefault(form.anchor()[0], []).append(form)
        # A form with no anchor worth looking for (a secret of few letters and digits): look everywhere.
        self.groups = (
            None
            if any(len(a) < MIN_ANCHOR for a in by_anchor)
            else [_group(anchor, members) for anchor, members in by_anchor.items()]
        )
        self.longest = max((form.longest() for form in forms), default=0)
        openings = [form.opening(MIN_PIECE, min(len(form.positions) - 1, OPENING)) for form in forms]
        self.openings = re.compile(f"(?:{'|'.join(openings)})\\Z") if openings else None
        self.ascii = all(secret.isascii() for secret in secrets)

    def _candidates(self, text: str, written: bool = False) -> list[tuple[int, int]] | None:
        """Every span where a group's expression matches (at every start, overlapping), looked for
        around its anchor; None: look everywhere (no anchors, or lower-casing moved the characters)."""
        if self.groups is None:
            return None
        lowered = text.lower()
        if len(lowered) != len(text):
            return None if any(group.anchor in lowered for group in self.groups) else []
        found = []
        for group in self.groups:
            at = lowered.find(group.anchor)
            if at < 0:
                continue
            scale = WRITTEN_GROWTH if written else 1
            before, after = group.before * scale, len(group.anchor) + group.after * scale
            pattern = group.written if written else group.pattern
            windows = []
            while at >= 0:
                windows.append((max(0, at - before), at + after))
                at = lowered.find(group.anchor, at + 1)
            for start, end in _merged(windows):
                match = pattern.search(text, start, end)
                while match is not None:
                    found.append(match.span())
                    if written:
                        return found
                    match = pattern.search(text, match.start() + 1, end)
        return found

    def matches(self, text: str) -> list[tuple[int, int]]:
        """The spans ``pattern.finditer`` finds in ``text``.

        Every match of ``pattern`` is a candidate: the first of its alternatives to match at a start
        is the first of its group's there. Where candidates do not overlap, they are its matches;
        where some do, ``pattern`` runs over them alone (no match of it crosses their edges).
        """
        if self.pattern is None:
            return []
        found = self._candidates(text)
        if found is None:
            return [match.span() for match in self.pattern.finditer(text)]
        found.sort()
        spans: list[tuple[int, int]] = []
        cluster: list[tuple[int, int]] = []
        for span in [*found, (len(text) + 1, len(text) + 1)]:
            if cluster and span[0] >= max(end for _, end in cluster):
                if len(cluster) == 1:
                    spans.append(cluster[0])
                else:
                    start, end = cluster[0][0], max(end for _, end in cluster)
                    spans += [match.span() for match in self.pattern.finditer(text, start, end)]
                cluster = []
            cluster.append(span)
        return spans

    def mask(self, text: str, mask: str) -> str:
        """``text`` with every form of every secret replaced by ``mask``, as ``pattern.sub`` does."""
        spans = self.matches(text)
        if not spans:
            return text
        pieces = []
        done = 0
        for start, end in spans:
            pieces += [text[done:start], mask]
            done = end
        pieces.append(text[done:])
        return "".join(pieces)

    def opening_at(self, text: str) -> int | None:
        """Where ``text`` ends with the opening of a form (``MIN_PIECE`` characters of it or more, not the
        whole), or None."""
        if self.openings is None:
            return None
        found = self.openings.search(text, max(0, len(text) - OPENING * WRITTEN_GROWTH))
        return None if found is None else found.start()

    def written_in(self, text: str) -> bool:
        """Whether ``text``, or a JSON string written in it, may hold a form."""
        if self.written is None:
            return False
        found = self._candidates(text, written=True)
        return self.written.search(text) is not None if found is None else bool(found)


@functools.lru_cache(maxsize=64)
def _made(secrets: tuple[str, ...], encodings: bool) -> SecretForms:
    return SecretForms(list(secrets), encodings)


# As written inside a JSON string, a way takes at most this many times its length (``\u00e9`` for é).
WRITTEN_GROWTH = 6


def _group(anchor: str, forms: list[Form]) -> _Group:
    reaches = [form.anchor() for form in forms]
    return _Group(
        anchor,
        re.compile("|".join(form.pattern(False) for form in forms)),
        re.compile("|".join(form.pattern(True) for form in forms)),
        max(before for _, before, _ in reaches),
        max(after for _, _, after in reaches),
    )


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans (in order of their starts) with those that overlap joined."""
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _literal(secret: str) -> list[Form]:
    """The secret as it is and JSON-escaped only (what redaction matched before encodings)."""
    written = {secret, _json(secret, True), _json(secret, False)}
    return [Form(tuple(Position(frozenset({c})) for c in text)) for text in written]
