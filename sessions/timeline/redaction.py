"""Redaction: what a shared view or a redacted export shows instead of a secret. The recording is never
changed; every frame, name and config is redacted as it is read out.

Built-in rules:
- values under names that look secret (headers, JSON fields, query parameters, environment variables,
  ``--token=…`` arguments, ``NAME=value`` and ``"name": "value"`` in text a server sent back);
- passwords in URLs (``scheme://user:password@host``);
- and, beyond names, every value equal to a secret of the session's own configuration (its secret env
  values, secret header values, bearer token, secret query parameters and arguments), wherever it
  appears: in what the server sent back too.

A sharer adds rules (``Rules``): more names, JSON paths (``params.arguments.password``,
``result.content[*].text``) and regular expressions.

An export or a share redacts every frame with one ``Redactor``, which skips the work that cannot change
anything (a rule on text without its characters, lines without a name word) and remembers texts, lines
and names it has seen: an env dump in 10,000 frames is redacted once. What it masks is exactly what the
rules applied one after the other to the whole text mask (tests/timeline/test_redaction.py holds it to that).
"""

from __future__ import annotations

import copy
import json
import re
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from sessions.frames import NUL, NUL_SHOWN, PREVIEW_CHARS, deeper_than
from sessions.timeline.names import (
    CASELESS,
    NAME_WORDS,
    SECRET_NAME,
    SPELLING_ESCAPE,
    looks_secret,
    plain_name,
    url_password,
)
from sessions.timeline.secret_forms import SecretForms
from sessions.timeline.secret_rules import (
    JSON_PATH,
    MIN_SECRET,
    URL_PASSWORD,
    Rules,
    config_secrets,
    path_parts,
)

__all__ = [
    "LARGE_PREVIEW",
    "MASK",
    "NAME_WORDS",
    "SECRET_NAME",
    "Redactor",
    "Rules",
    "config_secrets",
    "looks_secret",
    "preview_of",
]

MASK = "[redacted]"
# name=value in text (query strings, env dumps, argument lists): the name ends where the value starts.
# The quantifiers are possessive where giving back could never help (a name holds no "=", ":" or quote),
# so a long word without "=" costs one pass instead of one per length.
NAME_EQUALS = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,80}+)(?P<sep>=)(?P<value>[^\s&;,\"'<>]++)")
# "name": "value" inside text (JSON a server put in a string); the value unrolled: plain runs, escapes.
QUOTED_PAIR = re.compile(
    r'(?P<name>"[A-Za-z_][A-Za-z0-9_.-]{0,80}+"\s*+:\s*+)"(?P<value>[^"\\]*+(?:\\.[^"\\]*+)*+)"'
)
# Where a quoted pair might span lines (a newline around its ":" or in its value). Without one, every
# QUOTED_PAIR match of the text lies within a line and the text can go line by line.
QUOTED_ACROSS = re.compile(
    r'"[A-Za-z_][A-Za-z0-9_.-]{0,80}+"'
    r'(?:[^\S\n]*+\n\s*+:|\s*+:(?:[^\S\n]*+\n\s*+"|\s*+"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+\n))'
)
# Authorization: Bearer xyz / name: value lines.
HEADER_LINE = re.compile(r"(?im)^(?P<name>[A-Za-z][A-Za-z0-9-]{0,80}+)(?P<sep>:[ \t]*+)(?P<value>\S.*+)$")
# The characters of a name the rules above can see, and a value already masked (by a session secret).
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]+")
_MASKS = (MASK, f'"{MASK}"')
# What a Redactor remembers (an export or a share uses one for all its frames):
# - texts and what they became (the same env dump comes back in every frame), those of TEXT_CACHE_MIN
#   to TEXT_CACHE_CHARS characters: shorter ones are quick to redact and would push the long ones out;
TEXT_CACHE = 128
TEXT_CACHE_MIN = 256
TEXT_CACHE_CHARS = 32 * 1024
# - lines and what the line rules made of them, for texts of at least LINES_MIN lines;
LINES_REMEMBERED = 20_000
LINES_REMEMBERED_CHARS = 8 * 1024 * 1024
LINES_MIN = 4
# - names and whether they are masked;
VERDICTS = 10_000
# - texts of at most NAMED_CHARS characters, their digits as 0s, and whether a name rule could change
#   them (``plain``): messages come back but for their ids, counters and times. NAMED of them at most,
#   and NAMED_BYTES of their UTF-8.
NAMED = 2048
NAMED_CHARS = 2048
NAMED_BYTES = 1024 * 1024
MAX_DEPTH = 200
# What a row shows instead of its preview when its bytes were too big to redact for a list.
LARGE_PREVIEW = "(a large frame: open it to see it, redacted)"


class Redactor:
    """Redacts text, JSON values and frames by the built-in rules, the session's secrets and ``rules``."""

    def __init__(self, secrets: list[str], rules: Rules | None = None, *, encodings: bool = True) -> None:
        self.rules = rules or Rules()
        self.names = {n.lower() for n in self.rules.names}
        self.paths = [path_parts(p) for p in self.rules.paths if JSON_PATH.fullmatch(p)]
        patterns = []
        for pattern in self.rules.patterns:
            try:
                patterns.append(re.compile(pattern))
            except re.error:
                continue
        self.patterns = patterns
        # Every form of the session's secrets (as they are, JSON-escaped, URL-encoded, in any case,
        # base64, hex): one regular expression, run only where the text holds what each form holds.
        self.forms = SecretForms.of(secrets, encodings)
        self.secrets = self.forms.pattern
        # Rules of the sharer's own: ``plain`` cannot tell what they mask.
        self.own_rules = bool(self.rules.names or self.rules.paths or self.rules.patterns)
        # The words a name must hold to be masked: the built-in ones and the sharer's names (those a
        # name can be: a name is ASCII letters, digits and _.-).
        self.name_words = NAME_WORDS + tuple(n for n in self.names if _NAME_CHARS.fullmatch(n))
        self.verdicts: dict[str, bool] = {}  # name → masked or not
        self.named: dict[bytes, bool] = {}  # text, its digits as 0s → ``_names_plain`` of it
        self.named_bytes = 0
        self.head_verdicts: dict[str, bool] = {}  # the same for QUOTED_PAIR's '"name": ' as matched
        self.texts: dict[str, str] = {}  # text → redacted, least recently used first
        # Line → the line through the line rules: all three; those before QUOTED_PAIR; QUOTED_PAIR and
        # HEADER_LINE when no pair spans lines; HEADER_LINE alone after QUOTED_PAIR over the whole text.
        self.seen_all: dict[str, str] = {}
        self.seen_before: dict[str, str] = {}
        self.seen_after: dict[str, str] = {}
        self.seen_after_across: dict[str, str] = {}
        self.line_texts = self.line_hits = self.line_misses = self.seen_chars = 0

    @classmethod
    def for_session(cls, config: Any, rules: Rules | None = None) -> Redactor:
        return cls(config_secrets(config), rules)

    def secret_name(self, name: str) -> bool:
        return looks_secret(name) or name.lower() in self.names

    # --- text ------------------------------------------------------------------------------

    def text(self, text: str) -> str:
        """Text with every secret the rules find replaced by ``MASK``."""
        if not text:
            return text
        if not TEXT_CACHE_MIN <= len(text) <= TEXT_CACHE_CHARS:
            return self._text(text)
        texts = self.texts
        redacted = texts.pop(text, None)  # put back last: the least recently used go first
        if redacted is None:
            redacted = self._text(text)
            if len(texts) >= TEXT_CACHE:
                texts.pop(next(iter(texts), ""), None)
        texts[text] = redacted
        return redacted

    def _text(self, text: str) -> str:
        """``text`` without the cache: the rules in turn, each skipped where it cannot match.

        Every shortcut is exact: it leaves out only work that would change nothing. The tests hold the
        result to the rules applied one after the other to the whole text, on a corpus of tricky texts.
        The three name rules and URL_PASSWORD never match across a newline, so they can go line by line,
        and only the lines holding a name word (or a ``://``) can change; QUOTED_PAIR, whose values may
        span lines, goes over the whole text, between NAME_EQUALS and HEADER_LINE.
        """
        if len(self.verdicts) + len(self.head_verdicts) > VERDICTS:
            self.verdicts.clear()
            self.head_verdicts.clear()
        if self.secrets is not None and len(text) >= MIN_SECRET:
            text = self._session_secrets(text)
        if ":" in text or "=" in text:
            text = self._names_by_line(text) if self._remembering(text) else self._names_at_once(text)
        for pattern in self.patterns:
            text = pattern.sub(MASK, text)
        return text

    def _names_by_line(self, text: str) -> str:
        """URL_PASSWORD and the name rules, line by line, remembering lines."""
        if not ('"' in text and ":" in text):  # no quoted pair: the three line rules at once
            return self._line_by_line(text, self._line_rules, self.seen_all)
        text = self._line_by_line(text, self._urls_and_pairs, self.seen_before)
        if not self._holds_a_name_word(text):
            return text
        if QUOTED_ACROSS.search(text) is None:  # every quoted pair within a line
            return self._line_by_line(text, self._quoted_and_headers, self.seen_after)
        text, _ = self._quoted_pairs(text)
        return self._line_by_line(text, self._headers, self.seen_after_across)

    def _names_at_once(self, text: str) -> str:
        """URL_PASSWORD and the name rules, on the lines that can change, found once and followed."""
        words = self._word_lines(text)
        lines = (
            words if words is None or "://" not in text else sorted({*words, *_lines_holding(text, "://")})
        )
        if not ('"' in text and ":" in text):
            return _on_lines(text, lines, self._line_through_all)
        cuts: list[tuple[int, int]] = []
        text = _on_lines(text, lines, self._line_through_both, cuts)
        if words == []:  # no name word: no quoted pair to mask, no header either
            return text
        lines = None if lines is None else _shifted(lines, cuts)
        text, cuts_or_none = self._quoted_pairs(text)
        if cuts_or_none is None:  # a value across lines went: find the lines again
            lines = self._word_lines(text)
        elif lines is not None:
            lines = _shifted(lines, cuts_or_none)
        return _on_lines(text, lines, self._header_line) if ":" in text else text

    def _session_secrets(self, text: str) -> str:
        """Every form of the session's secrets masked, as ``self.secrets`` masks them."""
        return self.forms.mask(text, MASK)

    def _remembering(self, text: str) -> bool:
        """Whether to take ``text`` line by line, remembering lines (``_line_by_line``).

        Env dumps, headers and JSON a server sends again come back with most of their lines the same.
        Where lines seldom come back (logs), remembering them costs more than it saves: then only one
        text in 16 is remembered, to notice when they start to.
        """
        if text.count("\n") < LINES_MIN or len(text) > TEXT_CACHE_CHARS:
            return False
        self.line_texts += 1
        return self.line_misses <= 4 * self.line_hits + LINES_MIN * 100 or self.line_texts % 16 == 0

    def _line_by_line(self, text: str, rules: Callable[[str], str], seen: dict[str, str]) -> str:
        """``rules`` (line by line in effect) over ``text``, each line's result remembered in ``seen``.

        Only the lines not seen before go through the rules, all at once, joined.
        """
        if len(seen) > LINES_REMEMBERED or self.seen_chars > LINES_REMEMBERED_CHARS:
            for remembered in (self.seen_all, self.seen_before, self.seen_after, self.seen_after_across):
                remembered.clear()
            self.seen_chars = 0
        lines = text.split("\n")
        done = [seen.get(line) for line in lines]
        unseen = done.count(None)
        self.line_hits += len(lines) - unseen
        self.line_misses += unseen
        if self.line_misses > LINES_REMEMBERED:  # the recent past counts most
            self.line_misses //= 2
            self.line_hits //= 2
        if unseen:
            missing = list(dict.fromkeys(line for line, got in zip(lines, done, strict=True) if got is None))
            fresh = dict(zip(missing, rules("\n".join(missing)).split("\n"), strict=True))
            seen.update(fresh)
            self.seen_chars += sum(map(len, missing)) * 2
            done = [fresh[line] if got is None else got for line, got in zip(lines, done, strict=True)]
        return "\n".join(done)  # type: ignore[arg-type]  # every line is there now

    def _line_rules(self, text: str) -> str:
        """URL_PASSWORD, NAME_EQUALS and HEADER_LINE, each line through all three in turn."""
        return _on_lines(text, self._lines_to_see(text), self._line_through_all)

    def _urls_and_pairs(self, text: str) -> str:
        """URL_PASSWORD and NAME_EQUALS, each line through both."""
        return _on_lines(text, self._lines_to_see(text), self._line_through_both)

    def _quoted_and_headers(self, text: str) -> str:
        """QUOTED_PAIR and HEADER_LINE, each line through both (QUOTED_PAIR line by line: the lines
        joined here were not neighbours, a pair must not span them)."""
        return _on_lines(text, self._word_lines(text), self._line_quoted_and_header)

    def _line_quoted_and_header(self, line: str) -> str:
        if '"' in line and ":" in line:
            line, _ = self._quoted_pairs(line)
        return self._header_line(line)

    def _headers(self, text: str) -> str:
        return _on_lines(text, self._word_lines(text), self._header_line) if ":" in text else text

    def _lines_to_see(self, text: str) -> list[tuple[int, int]] | None:
        """The lines that hold a name word or a ``://``: the only ones the line rules can change (they
        add no name word)."""
        lines = self._word_lines(text)
        if lines is None or "://" not in text:
            return lines
        return sorted({*lines, *_lines_holding(text, "://")})

    def _line_through_all(self, line: str) -> str:
        return self._header_line(self._name_equals(_url_passwords(line)))

    def _line_through_both(self, line: str) -> str:
        return self._name_equals(_url_passwords(line))

    def _name_equals(self, line: str) -> str:
        return NAME_EQUALS.sub(self._pair, line) if "=" in line else line

    def _header_line(self, line: str) -> str:
        return HEADER_LINE.sub(self._pair, line) if ":" in line else line

    def _holds_a_name_word(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self.name_words)

    def _word_lines(self, text: str) -> list[tuple[int, int]] | None:
        """The lines (start, end) of ``text`` that hold a name word; None: maybe any of them."""
        lowered = text.lower()
        if len(lowered) != len(text):  # a character that lower-cases to two: positions no longer agree
            return None if any(word in lowered for word in self.name_words) else []
        lines: dict[int, int] = {}
        for word in self.name_words:
            at = lowered.find(word)
            while at >= 0:
                end = lowered.find("\n", at)
                end = len(text) if end < 0 else end
                lines[lowered.rfind("\n", 0, at) + 1] = end
                at = lowered.find(word, end)
        return sorted(lines.items())

    def _masked(self, name: str) -> bool:
        masked = self.verdicts.get(name)
        if masked is None:
            masked = self.verdicts[name] = self.secret_name(name)
        return masked

    def _pair(self, match: re.Match[str]) -> str:
        name = match.group(1)
        if not self._masked(name) or match.group(3) in _MASKS:
            return match.group(0)
        return f"{name}{match.group(2)}{MASK}"

    def _quoted_pairs(self, text: str) -> tuple[str, list[tuple[int, int]] | None]:
        """``QUOTED_PAIR`` over the whole text; and where the text changed length (``_shifted``), or
        None when a value that went held a newline (the lines moved).

        A loop over the matches rather than ``sub`` with a callback: most names are not secret, and
        for those this only looks the name up.
        """
        verdicts = self.head_verdicts
        pieces: list[str] = []
        cuts: list[tuple[int, int]] = []
        across = False
        done = 0
        for match in QUOTED_PAIR.finditer(text):
            head = match.group(1)  # '"name": ', remembered whole: no need to cut the name out each time
            masked = verdicts.get(head)
            if masked is None:
                masked = verdicts[head] = self.secret_name(head.split('"')[1])
            if masked:
                start, end = match.span(2)
                pieces += [text[done:start], MASK]
                done = end
                cuts.append((start, len(MASK) - (end - start)))
                across = across or "\n" in match.group(2)
        if not pieces:
            return text, []
        pieces.append(text[done:])
        return "".join(pieces), None if across else cuts

    # --- JSON ------------------------------------------------------------------------------

    def value(self, value: Any) -> Any:
        """A JSON value redacted: secret-named fields, the sharer's paths, and every string's text."""
        return self._walk(value, [], 0) if self.paths else self._walk_pathless(value, 0)

    def _walk_pathless(self, value: Any, depth: int) -> Any:
        """``_walk`` when the sharer gave no JSON paths: no path to carry from node to node."""
        if depth > MAX_DEPTH:
            return MASK
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if isinstance(item, str | int | float) and item != "" and self._masked(str(key)):
                    out[key] = MASK
                else:
                    out[key] = self._walk_pathless(item, depth + 1)
            return out
        if isinstance(value, list):
            return [self._walk_pathless(item, depth + 1) for item in value]
        return value

    def _walk(self, value: Any, path: list[str], depth: int) -> Any:
        if depth > MAX_DEPTH:
            return MASK
        if any(self._on_path(rule, path) for rule in self.paths):
            return MASK
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                key_text = str(key)
                if self.secret_name(key_text) and isinstance(item, str | int | float) and item != "":
                    out[key] = MASK
                else:
                    out[key] = self._walk(item, [*path, key_text], depth + 1)
            return out
        if isinstance(value, list):
            return [self._walk(item, [*path, str(i)], depth + 1) for i, item in enumerate(value)]
        if isinstance(value, str):
            return self.text(value)
        return value

    @staticmethod
    def _on_path(rule: list[str], path: list[str]) -> bool:
        return len(rule) == len(path) and all(r in ("*", p) for r, p in zip(rule, path, strict=True))

    # --- frames ----------------------------------------------------------------------------

    def raw(self, raw: bytes) -> bytes:
        """A frame's bytes redacted: as JSON when they parse (unchanged bytes when nothing was found)."""
        return self.raws([raw])[0]

    def raws(self, raws: list[bytes]) -> list[bytes]:
        """Frames' bytes redacted, as JSON when they parse (unchanged bytes when nothing was found); what
        ``plain`` looks for looked for once in all of them (most are in none). Nested deeper than
        MAX_DEPTH, bytes go as text: ``_plain`` holds however deep they are."""
        texts: list[str | None] = []
        for raw in raws:
            try:
                texts.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(None)
        plain = iter(self._plains([text for text in texts if text is not None]))
        shown = []
        for raw, text in zip(raws, texts, strict=True):
            if text is None:
                shown.append(self._raw_text(raw))
            elif next(plain):
                shown.append(raw)
            else:
                shown.append(self._parsed(raw, text))
        return shown

    def _parsed(self, raw: bytes, text: str) -> bytes:
        """``raw`` the long way: parsed, walked, and written again if anything was redacted."""
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # not JSON
            return self._raw_text(raw)
        # Each level opens a bracket: bytes with few brackets cannot nest deeper, no need to walk them.
        shallow = raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH
        if not shallow and isinstance(parsed, dict | list) and deeper_than(parsed, MAX_DEPTH):
            return self._raw_text(raw)
        redacted = self.value(parsed)
        if redacted == parsed:
            return raw
        return json.dumps(redacted, ensure_ascii=False, separators=(",", ":")).encode()

    def plain(self, text: str) -> bool:
        """Whether no rule can change ``text``, read as JSON (every key and string in it) or as text.

        A quick look, without parsing: True only when redacting would give ``text`` back (most frames
        of a session: requests, notifications, results without a name word), False when it might not.
        What it proves, with no rule of the sharer's own (``_clear``, then ``_names_plain``):
        - no form of a session secret, as it is or written inside a JSON string, and no URL with a
          password (``_url_password``: what ``URL_PASSWORD`` needs, escaped or not). Escapes that could
          spell them otherwise make it say False: ``\\/``, and ``\\uXXXX`` unless it is a character
          beyond ASCII (none of İ ı ſ K) and every secret is ASCII;
        - none of the four characters that match ASCII letters when case is ignored (İ ı ſ K), and
          every name word (``NAME_WORDS``, lower-cased) lies in a run of name characters that no name
          rule can take as a secret name: not followed by ``=`` or ``:`` (nor bordered by an escape),
          and the JSON string around it, if a key, not a secret name (``looks_secret``). A run is
          looked at once, whichever of its words is found first.
        """
        return self.plains([text])[0]

    def plains(self, texts: list[str]) -> list[bool]:
        """``plain`` of each; looked for once in all of them."""
        shallow = [len(text) <= MAX_DEPTH or text.count("[") + text.count("{") <= MAX_DEPTH for text in texts]
        plain = iter(self._plains([text for text, ok in zip(texts, shallow, strict=True) if ok]))
        return [ok and next(plain) for ok in shallow]

    def _plains(self, texts: list[str]) -> list[bool]:
        """``_clear`` and ``_names_plain`` of each text, at once for all of them where they can be.

        Joined by NULs, the texts pass ``_clear`` only if each does (nothing it looks for is a NUL or
        grows past one); most of a session's frames do, then each is not looked at again.
        """
        joined = "\x00".join(texts)
        if len(texts) > 1 and self._clear(joined):
            return self._names_plain(texts, joined)
        clear = [self._clear(text) for text in texts]
        kept = texts if all(clear) else [text for text, ok in zip(texts, clear, strict=True) if ok]
        plain = iter(self._names_plain(kept, joined if kept is texts else "\x00".join(kept)))
        return [ok and next(plain) for ok in clear]

    def _clear(self, text: str) -> bool:
        """``plain``, but for names: a few quick searches, each for what would make it say False."""
        if self.own_rules:
            return False
        if self.forms.written_in(text):
            return False
        escaped = SPELLING_ESCAPE.search(text) if self.forms.ascii else "\\/" in text or "\\u" in text
        if escaped:
            return False
        if "@" in text and "://" in text and url_password(text):  # "@" first: one quick search
            return False
        return text.isascii() or not any(c in text for c in CASELESS)

    def _names_plain(self, texts: list[str], joined: str) -> list[bool]:
        """``plain`` for names, of texts ``_clear`` passed (``joined``: them joined by NULs); a text
        seen before but for its digits is not looked at again (``named``).

        No digit changes what ``_names_searched`` finds: where a run of name characters starts and ends
        (a digit is one of them, whichever it is), whether a quote, an escape, ``=`` or ``:`` borders
        it, and whether it or a string is a secret name (no name word and no part of ``SECRET_NAME``
        or ``NOT_SECRET_NAME`` holds a digit; ``\\w`` takes any), so texts that differ only in their
        digits share one search for the name words, the costliest part of a redacted export.
        """
        named = self.named
        keys = [
            text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_0) if len(text) <= NAMED_CHARS else b""
            for text in texts
        ]
        known = [named.get(key) if key else None for key in keys]
        unseen = [i for i, plain in enumerate(known) if plain is None]
        if not unseen:
            return known  # type: ignore[return-value]  # every one is known
        if len(unseen) < len(texts):
            texts = [texts[i] for i in unseen]
            joined = "\x00".join(texts)
        if len(named) + len(unseen) > NAMED or self.named_bytes > NAMED_BYTES:
            named.clear()
            self.named_bytes = 0
        for i, plain in zip(unseen, self._names_searched(texts, joined), strict=True):
            known[i] = plain
            if keys[i]:
                named[keys[i]] = plain
                self.named_bytes += len(keys[i])
        return known  # type: ignore[return-value]  # every one is known now

    @staticmethod
    def _names_searched(texts: list[str], joined: str) -> list[bool]:
        """``_names_plain`` without what it remembers: the name words looked for in all the texts at
        once (most hold none), then the runs of each text holding one.

        Lower-cased, the texts keep their length: İ, the one character that lower-cases to two, is
        never clear.
        """
        lowered = joined.lower()
        starts = list(accumulate([len(text) + 1 for text in texts], initial=0))  # in ``joined``
        found: dict[int, list[tuple[int, int]]] = {}
        for word in NAME_WORDS:  # a search for each is quicker than one regular expression for all
            at = lowered.find(word)
            while at >= 0:
                i = bisect_right(starts, at) - 1
                found.setdefault(i, []).append((at - starts[i], at - starts[i] + len(word)))
                at = lowered.find(word, at + 1)
        plain = [True] * len(texts)
        for i, spans in found.items():
            text = texts[i]
            done = 0  # where the last run looked at ends
            for start, end in sorted(spans):
                if start >= done:
                    done = plain_name(text, start, end)
                    if done < 0:
                        plain[i] = False
                        break
        return plain

    def _raw_text(self, raw: bytes) -> bytes:
        """Bytes that are not JSON, redacted as text; bytes that are not UTF-8 pass through as they are."""
        text = raw.decode("utf-8", errors="surrogateescape")
        redacted = self.text(text)
        return raw if redacted == text else redacted.encode("utf-8", errors="surrogateescape")

    def transport(self, transport: Any) -> Any:
        """A frame's transport details (HTTP headers, URL, stderr) redacted like JSON."""
        return self.value(transport) if isinstance(transport, dict) else transport

    def config(self, config: Any) -> dict[str, Any]:
        """A session's configuration as a share shows it."""
        return self.value(config) if isinstance(config, dict) else {}

    def row(self, row: dict[str, Any], raw: bytes | None) -> dict[str, Any]:
        """A timeline row (``SUMMARY_FIELDS``) redacted, its preview made again from the redacted bytes.

        The stored preview is the bytes' first 300 characters: one cut through a secret would show its
        head, which no rule recognises. ``raw`` None (too big to read for a list): no preview at all.
        """
        shown = dict(row)
        for name in ("method", "rpc_id", "note", "uri"):
            if isinstance(shown.get(name), str):
                shown[name] = self.text(shown[name])
        shown["transport"] = self.transport(shown.get("transport"))
        shown["verdicts"] = self.value(shown.get("verdicts") or [])
        if raw is None:
            shown["preview"] = LARGE_PREVIEW
        else:
            head = self.raw(raw)[:PREVIEW_CHARS].decode("utf-8", errors="replace").replace("\n", " ")
            shown["preview"] = head or str(shown.get("note") or "")[:PREVIEW_CHARS]
        return shown

    def frame(self, frame: Any) -> Any:
        """A stored frame (a ``TimelineFrame``) redacted: a copy, never saved; the original is untouched."""
        shown = copy.copy(frame)
        shown.raw = self.raw(bytes(frame.raw))
        shown.size = len(shown.raw)
        shown.transport = self.transport(frame.transport)
        shown.verdicts = self.value(frame.verdicts if isinstance(frame.verdicts, list) else [])
        for name in ("method", "rpc_id", "note", "uri", "parse_error"):
            value = getattr(frame, name, "")
            if isinstance(value, str):
                setattr(shown, name, self.text(value))
        shown.preview = preview_of(shown.raw, shown.note if isinstance(shown.note, str) else "")
        shown.save = _never_saved
        return shown

    def session(self, session: Any) -> Any:
        """A session (an ``McpSession``) as a share shows it: name, server URL, config, facts redacted.

        The name often is the server's URL, with whatever ``?api_key=`` it carried.
        """
        shown = copy.copy(session)
        shown.name = self.text(session.name)
        shown.config = self.config(session.config)
        for name in ("server_info", "server_capabilities", "client_capabilities", "phases", "roots"):
            setattr(shown, name, self.value(getattr(session, name)))
        shown.instructions = self.text(session.instructions)
        shown.status_note = self.text(session.status_note)
        shown.server_process = {}
        shown.worker_channel = ""
        shown.save = _never_saved
        return shown

    def changes(self, raw: bytes) -> bool:
        """Whether redaction changes these bytes (for the preview of what a share shows)."""
        return self.raw(raw) != raw


_DIGITS_AS_0 = bytes.maketrans(b"123456789", b"000000000")


def preview_of(raw: bytes, note: str) -> str:
    """A frame's preview as the recorder makes it (``frame_row``), of bytes redacted already: the stored
    one may be cut through a secret, whose head no rule recognises."""
    preview = (
        raw[:PREVIEW_CHARS].decode("utf-8", errors="replace").replace("\n", " ")
        if raw
        else note[:PREVIEW_CHARS]
    )
    return preview.replace(NUL, NUL_SHOWN)


def _url_passwords(line: str) -> str:
    return URL_PASSWORD.sub(_masked_password, line) if "://" in line else line


def _masked_password(match: re.Match[str]) -> str:
    return match["head"] + MASK


def _lines_holding(text: str, needle: str) -> list[tuple[int, int]]:
    """The lines (start, end) of ``text`` that hold ``needle``."""
    lines = []
    at = text.find(needle)
    while at >= 0:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        lines.append((text.rfind("\n", 0, at) + 1, end))
        at = text.find(needle, end)
    return lines


def _on_lines(
    text: str,
    lines: list[tuple[int, int]] | None,
    redact: Callable[[str], str],
    cuts: list[tuple[int, int]] | None = None,
) -> str:
    """``text`` with ``redact`` applied to these lines only (None: to all of it); each line that changed
    length is added to ``cuts`` (for ``_shifted``).

    Exact for rules whose matches never hold a newline (``NAME_EQUALS``, ``HEADER_LINE``,
    ``URL_PASSWORD``) when the other lines are ones they cannot change.
    """
    if lines is None:
        return redact(text)
    pieces = []
    done = 0
    for start, end in lines:
        line = text[start:end]
        redacted = redact(line)
        if redacted != line:
            pieces += [text[done:start], redacted]
            done = end
            if cuts is not None:
                cuts.append((start, len(redacted) - len(line)))
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _shifted(lines: list[tuple[int, int]], cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where ``lines`` are once the text changed length at ``cuts`` (none adds or takes a newline)."""
    moved = []
    shift = cut = 0
    for start, end in lines:
        while cut < len(cuts) and cuts[cut][0] < start:  # between the lines before and this one
            shift += cuts[cut][1]
            cut += 1
        moved_start = start + shift
        while cut < len(cuts) and cuts[cut][0] < end:  # in this line
            shift += cuts[cut][1]
            cut += 1
        moved.append((moved_start, end + shift))
    return moved


def _never_saved(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a redacted copy of a frame is never saved: the recording is never changed")
