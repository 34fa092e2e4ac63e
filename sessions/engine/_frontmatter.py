"""A SKILL.md's YAML frontmatter, read with a small safe reader of the YAML that frontmatter uses.

Agent Skills frontmatter is a flat mapping of short fields (``name``, ``description``, ``license``,
``allowed-tools``) with an optional ``metadata`` mapping. This reader handles that shape and no more:
block mappings nested by indentation, block sequences of scalars, flow sequences and mappings of
scalars, plain, single- and double-quoted scalars (YAML 1.2 core types: null, booleans, integers,
floats, else strings), literal (``|``) and folded (``>``) block scalars, multi-line plain scalars
and comments. Anything else (anchors, aliases, tags, complex keys, sequences of mappings) raises
``FrontmatterUnsupported`` rather than guessing: a host that cannot compare the frontmatter must not
load the skill. Nothing is ever executed or instantiated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["FrontmatterError", "FrontmatterUnsupported", "parse_frontmatter", "split_frontmatter"]


class FrontmatterError(ValueError):
    """The SKILL.md has no frontmatter block, or it is not valid YAML."""


class FrontmatterUnsupported(FrontmatterError):
    """Valid YAML, perhaps, but beyond what this reader handles (so it cannot be compared)."""


_BLOCK = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
# `key:` then a space or the end; a plain key starts with no indicator and runs to the first `:`.
_KEY = re.compile(
    r"""^(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{}\[\],&*!|>%@`-][^:#]*?|-[^\s:][^:#]*?)"""
    r"""[ \t]*:(?:[ \t]+|$)(?P<rest>.*)$"""
)
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
            "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0",
            "L": "\u2028", "P": "\u2029"}  # fmt: skip
_HEX = {"x": 2, "u": 4, "U": 8}


def split_frontmatter(text: str) -> tuple[str, str]:
    """Return the frontmatter block (between the leading ``---`` lines) and the body after it."""
    if text.startswith("\ufeff"):
        text = text[1:]
    match = _BLOCK.match(text)
    if match is None:
        raise FrontmatterError("SKILL.md does not begin with a --- delimited YAML frontmatter block")
    return match.group(1), text[match.end() :]


def parse_frontmatter(text: str) -> dict[str, Any]:
    """The frontmatter of a SKILL.md as JSON-compatible values; raises ``FrontmatterError``."""
    block, _ = split_frontmatter(text)
    lines = [_Line(i + 1, raw) for i, raw in enumerate(block.replace("\r\n", "\n").split("\n"))]
    reader = _Reader(lines)
    reader.skip_blank()
    if reader.done():
        return {}
    value = reader.node(reader.peek().indent)
    reader.skip_blank()
    if not reader.done():
        raise FrontmatterError(f"line {reader.peek().number}: unexpected indentation")
    if not isinstance(value, dict):
        raise FrontmatterError("the frontmatter is not a mapping of fields")
    return value


@dataclass(slots=True)
class _Line:
    number: int
    raw: str

    @property
    def indent(self) -> int:
        return len(self.raw) - len(self.raw.lstrip(" "))

    @property
    def body(self) -> str:
        return self.raw.strip(" ")

    @property
    def blank(self) -> bool:
        body = self.body
        return not body or body.startswith("#")


class _Reader:
    def __init__(self, lines: list[_Line]) -> None:
        self.lines = lines
        self.at = 0

    def done(self) -> bool:
        return self.at >= len(self.lines)

    def peek(self) -> _Line:
        return self.lines[self.at]

    def skip_blank(self) -> None:
        while not self.done() and self.peek().blank:
            self.at += 1

    def node(self, indent: int) -> Any:
        """A block mapping or sequence whose lines start at ``indent``."""
        line = self.peek()
        if line.body.startswith("- ") or line.body == "-":
            return self.sequence(indent)
        return self.mapping(indent)

    def mapping(self, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while True:
            self.skip_blank()
            if self.done() or self.peek().indent < indent:
                return result
            line = self.peek()
            if line.indent > indent:
                raise FrontmatterError(f"line {line.number}: unexpected indentation")
            _no_tabs(line)
            body = line.body
            if body.startswith(("? ", "&", "*", "!", "%", "---", "...")):
                raise FrontmatterUnsupported(f"line {line.number}: {body[:1]!r} constructs are not supported")
            match = _KEY.match(body)
            if match is None:
                raise FrontmatterError(f"line {line.number}: expected `key: value`")
            text = match.group("key").strip()
            key = _scalar(text, line.number) if text[:1] in ("'", '"') else text
            if key in result:
                raise FrontmatterError(f"line {line.number}: duplicate key {key!r}")
            self.at += 1
            result[key] = self.value(match.group("rest").strip(), indent, line.number, in_mapping=True)

    def sequence(self, indent: int) -> list[Any]:
        result: list[Any] = []
        while True:
            self.skip_blank()
            if self.done() or self.peek().indent < indent:
                return result
            line = self.peek()
            if line.indent > indent:
                raise FrontmatterError(f"line {line.number}: unexpected indentation")
            _no_tabs(line)
            body = line.body
            if not (body.startswith("- ") or body == "-"):
                return result
            self.at += 1
            rest = body[1:].strip()
            if _KEY.match(rest) and not rest.startswith(("'", '"', "[", "{")):
                raise FrontmatterUnsupported(f"line {line.number}: sequences of mappings are not supported")
            result.append(self.value(rest, indent, line.number, in_mapping=False))

    def value(self, rest: str, indent: int, number: int, *, in_mapping: bool) -> Any:
        """The value after ``key:`` or ``-``: inline, a block scalar, or a nested block."""
        rest = _strip_comment(rest)
        if rest[:1] in ("|", ">"):
            return self.block_scalar(rest, indent, number)
        if rest[:1] in ("&", "*", "!"):
            raise FrontmatterUnsupported(f"line {number}: anchors, aliases and tags are not supported")
        if rest:
            if rest[:1] in ("'", '"') and not _closed_quote(rest):
                return self.multiline_quoted(rest, number)
            return self.continued(rest, indent, number)
        self.skip_blank()
        if self.done():
            return None
        line = self.peek()
        # A mapping's value may be a sequence at the same indentation ("key:\n- a").
        if line.indent > indent or (in_mapping and line.indent == indent and line.body.startswith("- ")):
            return self.node(line.indent)
        return None

    def continued(self, first: str, indent: int, number: int) -> Any:
        """A plain scalar, possibly folded over more-indented lines."""
        parts = [first]
        while not self.done():
            line = self.peek()
            if line.body and line.indent > indent and not line.body.startswith("#") and first[:1] not in "[{":
                part = _strip_comment(line.body)
                if ": " in part or part.endswith(":"):
                    raise FrontmatterError(f"line {line.number}: a mapping cannot follow a value on its key")
                parts.append(part)
                self.at += 1
            elif not line.body and self._continues_after_blank(indent):
                parts.append("\n")
                self.at += 1
            else:
                break
        if len(parts) == 1:
            return _scalar(first, number)
        text = ""
        for part in parts:
            text += part if part == "\n" or not text or text.endswith("\n") else " " + part
        return text

    def _continues_after_blank(self, indent: int) -> bool:
        at = self.at
        while at < len(self.lines) and not self.lines[at].body:
            at += 1
        return at < len(self.lines) and self.lines[at].indent > indent and not self.lines[at].blank

    def multiline_quoted(self, first: str, number: int) -> str:
        text = first
        while not self.done():
            line = self.peek()
            self.at += 1
            text += "\n" + line.body
            if _closed_quote(text):
                break
        else:
            raise FrontmatterError(f"line {number}: unterminated quoted string")
        # Line breaks inside quotes fold like plain scalars: one break is a space, a blank line a newline.
        quote = text[0]
        inner = text[1 : text.rindex(quote)]
        folded = re.sub(r"[ \t]*\n[ \t]*", "\n", inner)
        folded = re.sub(r"\n(?!\n)", " ", folded)
        folded = re.sub(r"\n\n", "\n", folded)
        return str(_scalar(quote + folded + quote, number))

    def block_scalar(self, header: str, indent: int, number: int) -> str:
        match = re.fullmatch(r"([|>])([-+]?)([1-9]?)([-+]?)", header)
        if match is None:
            raise FrontmatterError(f"line {number}: bad block scalar header {header!r}")
        style, chomp = match.group(1), match.group(2) or match.group(4)
        explicit = int(match.group(3)) if match.group(3) else None
        raw: list[str] = []
        while not self.done():
            line = self.peek()
            if line.body and line.indent <= indent:
                break
            raw.append(line.raw)
            self.at += 1
        content_indent = indent + explicit if explicit else None
        if content_indent is None:
            firsts = [len(r) - len(r.lstrip(" ")) for r in raw if r.strip(" ")]
            content_indent = firsts[0] if firsts else indent + 1
        lines = [r[content_indent:] if len(r) >= content_indent else "" for r in raw]
        while lines and not lines[-1].strip(" "):
            lines.pop()
        trailing = len(raw) - len(lines)
        text = "\n".join(lines) if style == "|" else _fold(lines)
        if not lines:
            return ""
        if chomp == "-":
            return text
        if chomp == "+":
            return text + "\n" * (1 + trailing)
        return text + "\n"


def _fold(lines: list[str]) -> str:
    """A folded (``>``) block: a break between two plain lines is a space, empty lines are breaks,
    and lines indented further keep their breaks."""
    text, last, empty = "", None, 0
    for line in lines:
        if not line.strip(" "):
            empty += 1
            continue
        if last is None:
            text = "\n" * empty + line
        elif line[:1] == " " or last[:1] == " ":
            text += "\n" * (1 + empty) + line
        else:
            text += ("\n" * empty if empty else " ") + line
        last, empty = line, 0
    return text


def _no_tabs(line: _Line) -> None:
    lead = line.raw[: len(line.raw) - len(line.raw.lstrip(" \t"))]
    if "\t" in lead:
        raise FrontmatterError(f"line {line.number}: tabs cannot indent YAML")


def _closed_quote(text: str) -> bool:
    return _quoted_end(text) is not None


def _strip_comment(text: str) -> str:
    """Drop a `` #`` comment from a plain (unquoted) value."""
    if text[:1] in ("'", '"'):
        end = _quoted_end(text)
        return text if end is None else text[: end + 1] + _strip_comment(text[end + 1 :]).rstrip()
    if text.startswith("#"):
        return ""
    match = re.search(r"[ \t]#", text)
    return (text[: match.start()] if match else text).rstrip()


def _quoted_end(text: str) -> int | None:
    quote, i = text[0], 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i
        i += 1
    return None


def _scalar(text: str, number: int) -> Any:
    """One inline value: quoted, flow collection, or plain (typed by the YAML 1.2 core schema)."""
    if text[:1] == '"':
        end = _quoted_end(text)
        if end is None or text[end + 1 :].strip():
            raise FrontmatterError(f"line {number}: bad double-quoted string")
        return _unescape(text[1:end], number)
    if text[:1] == "'":
        end = _quoted_end(text)
        if end is None or text[end + 1 :].strip():
            raise FrontmatterError(f"line {number}: bad single-quoted string")
        return text[1:end].replace("''", "'")
    if text[:1] in ("[", "{"):
        return _flow(text, number)
    if text[:1] in ("&", "*", "!", "@", "`", "%"):
        raise FrontmatterUnsupported(f"line {number}: {text[:1]!r} is not supported in a plain value")
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.match(text):
        return int(text)
    if re.fullmatch(r"0o[0-7]+", text):
        return int(text[2:], 8)
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    lowered = text.lower()
    if lowered in (".inf", "+.inf", "-.inf", ".nan"):
        raise FrontmatterUnsupported(f"line {number}: {text} has no JSON form")
    return text


def _flow(text: str, number: int) -> Any:
    """A flow sequence or mapping of scalars on one line: ``[a, b]``, ``{k: v}``."""
    opener, closer = text[0], "]" if text[0] == "[" else "}"
    if not text.endswith(closer):
        raise FrontmatterUnsupported(f"line {number}: multi-line flow collections are not supported")
    items = _split_flow(text[1:-1], number)
    if opener == "[":
        return [_scalar(item, number) for item in items]
    result: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep:
            raise FrontmatterUnsupported(f"line {number}: flow mapping entries need `key: value`")
        name = _scalar(key.strip(), number)
        result[name if isinstance(name, str) else key.strip()] = _scalar(value.strip(), number)
    return result


def _split_flow(inner: str, number: int) -> list[str]:
    items, current, quote, i = [], "", "", 0
    while i < len(inner):
        ch = inner[i]
        if quote:
            current += ch
            if ch == "\\" and quote == '"' and i + 1 < len(inner):
                current += inner[i + 1]
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in ("'", '"'):
            quote, current = ch, current + ch
        elif ch in "[]{}":
            raise FrontmatterUnsupported(f"line {number}: nested flow collections are not supported")
        elif ch == ",":
            items.append(current.strip())
            current = ""
        else:
            current += ch
        i += 1
    if current.strip():  # else a trailing comma, which YAML allows
        items.append(current.strip())
    return items


def _unescape(text: str, number: int) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        code = text[i + 1 : i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in _HEX:
            digits = text[i + 2 : i + 2 + _HEX[code]]
            if len(digits) != _HEX[code] or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                raise FrontmatterError(f"line {number}: bad \\{code} escape")
            out.append(chr(int(digits, 16)))
            i += 2 + _HEX[code]
        else:
            raise FrontmatterError(f"line {number}: unknown escape \\{code}")
    return "".join(out)
