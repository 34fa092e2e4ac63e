"""A frame as the database keeps it: the one row schema, its JSON Lines codec, and its query columns.

The engine's ``Frame`` is what happened on the wire. A stored row is that frame numbered within its
session, plus columns computed once, when the frame is recorded, so that queries never have to dig
into a truncated preview: ``is_error`` (an error response, a result with ``isError``, stderr, an
exit), ``uri`` (the resource a request or notification names) and ``level`` (a log level). JSON Lines
records (the export, ``--record``, "Open a recording") have one shape: ``Frame.to_dict()``.

Pure Python: the runtime, the read side and the tests all use it.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, cast

from sessions.engine import Frame, Verdict

__all__ = [
    "JSON_FIELDS",
    "RECORD_FIELDS",
    "ROW_FIELDS",
    "SEVERITY_ORDER",
    "SUMMARY_FIELDS",
    "RecordError",
    "StoredVerdicts",
    "answers",
    "deeper_than",
    "frame_from_record",
    "frame_of",
    "frame_row",
    "indented_json",
    "message_of",
    "params_of",
    "pretty_json",
    "record_line",
    "record_text",
    "rpc_id_json",
    "storable",
    "stored_rpc_id",
    "summary",
    "transport_json",
    "verdicts_json",
]

PREVIEW_CHARS = 300
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
# The stored columns of a frame, in the order the recorder writes them.
ROW_FIELDS = (
    "seq", "kind", "direction", "wall", "mono", "method", "rpc_id", "rpc_kind", "pair_seq", "latency_ms",
    "size", "raw", "preview", "parse_error", "transport", "verdicts", "worst", "note",
    "is_error", "uri", "level",
)  # fmt: skip
JSON_FIELDS = frozenset({"transport", "verdicts"})
# What a timeline row shows and a live batch carries: everything but the bytes.
SUMMARY_FIELDS = tuple(f for f in ROW_FIELDS if f not in ("raw", "mono", "parse_error"))
# Methods whose params name a resource, and those whose params carry a log level.
URI_METHODS = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated"}
)
LEVEL_METHODS = frozenset({"notifications/message", "logging/setLevel"})
KINDS = frozenset({"message", "stderr", "http", "state", "exit"})
DIRECTIONS = frozenset({"in", "out", "local"})
SEVERITIES = frozenset({"error", "warning", "info"})
RPC_KINDS = frozenset({"request", "notification", "result", "error", "batch", "invalid"})
ENCODINGS = frozenset({"utf-8", "latin-1"})
# The widths of the text columns a frame fills from what a server sent (TimelineFrame); longer
# values are cut, so a database that enforces widths (PostgreSQL) never refuses a frame for them.
# The bytes keep everything.
METHOD_CHARS, RPC_ID_CHARS, URI_CHARS, LEVEL_CHARS = 200, 200, 2000, 20
MAX_SEQ = 2**63 - 1  # a BigIntegerField
# Wall-clock seconds a page can show as a date: 1970 up to the end of the year 9999.
MAX_WALL = 253_402_300_799.0
MAX_DEPTH = 64  # a record's own nesting (its raw bytes are text, whatever they hold)
NUL, NUL_SHOWN = "\x00", "\N{SYMBOL FOR NULL}"


class RecordError(ValueError):
    """A JSON Lines record is not a frame."""


def message_of(raw: bytes | memoryview | str) -> dict[str, Any]:
    """A stored frame's JSON-RPC message, or ``{}`` when its bytes are not one JSON object."""
    try:
        message = json.loads(bytes(raw) if isinstance(raw, memoryview) else raw)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python can follow
        return {}
    return message if isinstance(message, dict) else {}


def params_of(raw: bytes | memoryview | str) -> dict[str, Any]:
    """A stored frame's params, or ``{}``."""
    params = message_of(raw).get("params")
    return params if isinstance(params, dict) else {}


def pretty_json(raw: bytes | memoryview) -> str:
    """A frame's bytes as indented JSON, or "" when they are not JSON."""
    try:
        return indented_json(json.loads(bytes(raw)))
    except (ValueError, RecursionError):
        return ""


class _Unusual(Exception):
    """A value ``indented_json`` leaves to json.dumps: nested deep, or not what json.loads makes."""


INDENTED_DEPTH = 100  # deeper, json.dumps writes it (and fails as it fails)


def indented_json(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` of a value json.loads made, byte for byte, in
    a third of the time: json.dumps indents in pure Python, a generator per container."""
    out: list[str] = []
    try:
        _indented(value, out, "\n", 0)
    except _Unusual:
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(out)


def _indented(value: Any, out: list[str], newline: str, depth: int) -> None:
    """Append ``value`` (a container, or a scalar at the top) indented below ``newline``."""
    kind = type(value)
    if kind is dict:
        items: Any = value.items()
        if not value:
            out.append("{}")
            return
        opening, closing = "{", "}"
    elif kind is list:
        items = value
        if not value:
            out.append("[]")
            return
        opening, closing = "[", "]"
    else:
        out.append(_scalar(value))
        return
    if depth >= INDENTED_DEPTH:
        raise _Unusual
    inner = newline + "  "
    between = "," + inner
    append = out.append
    append(opening)
    first = True
    for entry in items:
        append(inner if first else between)
        first = False
        if kind is dict:
            key, entry = entry
            if type(key) is not str:
                raise _Unusual
            append(_string(key))
            append(": ")
        child = type(entry)
        if child is str:
            append(_string(entry))
        elif child is dict or child is list:
            _indented(entry, out, inner, depth + 1)
        else:
            append(_scalar(entry))
    append(newline)
    append(closing)


def _scalar(value: Any) -> str:
    """A JSON scalar as json.dumps writes it."""
    if type(value) is str:
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int or type(value) is float:
        return _json_number(value)
    raise _Unusual


def _query_columns(frame: Frame) -> tuple[bool, str, str]:
    """``is_error``, ``uri`` and ``level`` of a frame, from its whole message (never a preview)."""
    if frame.kind in ("stderr", "exit"):
        return True, "", ""
    if frame.kind != "message" or frame.rpc_kind not in ("result", "error", "request", "notification"):
        return False, "", ""
    if frame.rpc_kind == "error":
        return True, "", ""
    wanted = frame.rpc_kind == "result" or frame.method in URI_METHODS or frame.method in LEVEL_METHODS
    if not wanted:
        return False, "", ""
    message = frame.message if isinstance(frame.message, dict) else message_of(frame.raw)
    if frame.rpc_kind == "result":
        result = message.get("result")
        return isinstance(result, dict) and result.get("isError") is True, "", ""
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    uri = params.get("uri") if frame.method in URI_METHODS else None
    level = params.get("level") if frame.method in LEVEL_METHODS else None
    uri = _text(uri)[:URI_CHARS] if isinstance(uri, str) else ""
    return False, uri, _text(level)[:LEVEL_CHARS] if isinstance(level, str) else ""


def _text(value: str) -> str:
    """Text a server sent, fit for any database: PostgreSQL refuses NUL in text, so it is shown as ␀."""
    return value.replace(NUL, NUL_SHOWN) if NUL in value else value


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def storable(value: Any) -> Any:
    """A JSON value with every NUL in its strings (keys too) shown as ␀: jsonb and text refuse NUL."""
    return _clean(value) if _has_nul(value) else value


def _has_nul(value: Any) -> bool:
    # Loops, not any() over generators: this runs on every column of every frame a flood brings.
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        for key, item in value.items():
            if NUL in (key if isinstance(key, str) else str(key)):
                return True
            if isinstance(item, str):
                if NUL in item:
                    return True
            elif isinstance(item, dict | list) and item and _has_nul(item):
                return True
        return False
    if isinstance(value, list):
        for item in value:
            if _has_nul(item):
                return True
    return False


class StoredVerdicts(list[dict[str, str]]):
    """A frame's verdicts as stored (dicts, NUL shown as ␀), with their JSON text made once."""

    __slots__ = ("json",)

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.json = json.dumps(self) if self else "[]"


@functools.lru_cache(maxsize=1024)
def _verdict_columns(verdicts: tuple[Verdict, ...]) -> tuple[StoredVerdicts, str]:
    """The verdicts column and the worst severity. A flood repeats the same verdicts on every frame:
    they are built and encoded once (the row's list is shared, so nothing may change it)."""
    stored = StoredVerdicts(storable([v.to_dict() for v in verdicts]))
    worst = min((v["severity"] for v in stored), key=SEVERITY_ORDER.__getitem__, default="")
    return stored, worst


_last_verdicts: tuple[tuple[Verdict, ...], tuple[StoredVerdicts, str]] = ((), (StoredVerdicts(), ""))


def frame_row(frame: Frame, base: int) -> dict[str, Any]:
    """Flatten an engine frame into the stored columns, numbered within the session from ``base``."""
    # Runs on the event loop for every frame a flood brings: what is empty is not passed through _text.
    global _last_verdicts
    verdicts: list[dict[str, str]]
    if frame.verdicts:
        key = tuple(frame.verdicts)
        if key == _last_verdicts[0]:  # a flood's frames repeat one verdict, often the same object
            verdicts, worst = _last_verdicts[1]
        else:
            verdicts, worst = columns = _verdict_columns(key)
            _last_verdicts = (key, columns)
    else:
        verdicts, worst = [], ""
    raw, method, note, rpc_id, transport = frame.raw, frame.method, frame.note, frame.rpc_id, frame.transport
    preview = raw[:PREVIEW_CHARS].decode("utf-8", errors="replace").replace("\n", " ") if raw else ""
    if not preview and note:
        preview = note[:PREVIEW_CHARS]
    is_error, uri, level = _query_columns(frame)
    return {
        "seq": base + frame.seq,
        "kind": frame.kind,
        "direction": frame.direction,
        "wall": frame.wall,
        "mono": frame.mono,
        "method": _text(method)[:METHOD_CHARS] if method else "",
        "rpc_id": _text(json.dumps(rpc_id))[:RPC_ID_CHARS] if rpc_id is not None else "",
        "rpc_kind": frame.rpc_kind or "",
        "pair_seq": base + frame.pair_seq if frame.pair_seq is not None else None,
        "latency_ms": frame.latency_ms,
        "size": len(raw),
        "raw": raw,
        "preview": _text(preview) if preview else "",
        "parse_error": _text(frame.parse_error) if frame.parse_error else "",
        "transport": storable(transport) if transport else transport,
        "verdicts": verdicts,
        "worst": worst,
        "note": _text(note) if note else "",
        "is_error": is_error,
        "uri": uri,
        "level": level,
    }


def answers(rows: list[dict[str, Any]]) -> bool:
    """Whether rows hold a response (a running call card may be waiting for it)."""
    return any(r["direction"] == "in" and r["rpc_kind"] in ("result", "error") for r in rows)


def summary(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its bytes: what a live batch carries to viewers."""
    return {name: row[name] for name in SUMMARY_FIELDS}


def _verdicts(items: Any) -> list[Verdict]:
    """Stored or recorded verdicts (dicts) back as engine verdicts; what is not one is left out."""
    return [
        Verdict(str(v.get("code", "?")), v["severity"], str(v.get("message", "")))
        for v in items or []
        if isinstance(v, dict) and v.get("severity") in SEVERITIES
    ]


def frame_of(row: Any) -> Frame:
    """A stored row (a model instance) back as an engine frame, numbered as stored."""
    rpc_id = stored_rpc_id(row.rpc_id) if row.rpc_id else None
    return Frame(
        row.kind,
        row.direction,
        bytes(row.raw),
        transport=row.transport if isinstance(row.transport, dict) else {},
        wall=row.wall,
        mono=row.mono,
        seq=row.seq,
        parse_error=row.parse_error or None,
        rpc_kind=row.rpc_kind or None,
        method=row.method or None,
        rpc_id=rpc_id,
        verdicts=_verdicts(row.verdicts),
        pair_seq=row.pair_seq,
        latency_ms=row.latency_ms,
        note=row.note or None,
    )


def record_line(row: Any) -> str:
    """A stored row as one JSON Lines record (the same shape as ``--record`` writes)."""
    return json.dumps(frame_of(row).to_dict(), ensure_ascii=False) + "\n"


# --- the same record, written from a row's values (what an export reads) --------------------------------
# ``record_text`` writes byte for byte what ``record_line`` writes, without a model instance, a Frame or
# a dict: json.dumps's own string encoder for each text, numbers as json writes them, and the JSON
# columns copied as stored where the stored text is already what json.dumps(..., ensure_ascii=False)
# would write of its value.

RECORD_FIELDS = (
    "seq", "kind", "direction", "wall", "mono", "raw", "transport", "parse_error", "rpc_kind", "method",
    "rpc_id", "verdicts", "pair_seq", "latency_ms", "note",
)  # fmt: skip
_string = json.encoder.encode_basestring  # type: ignore[attr-defined]  # a str, as ensure_ascii=False writes it
_encode = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(value, ensure_ascii=False) writes


def _json_number(value: Any) -> str:
    """A number (or None) as json.dumps writes it."""
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float:
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return "null" if value is None else _encode(value)


def transport_json(stored: str | None, verbatim: bool) -> str:
    """A frame's stored ``transport`` (JSON text) as its record writes it: the object, or ``{}``.

    ``verbatim``: the stored text is what ``json.dumps(value)`` wrote (SQLite keeps it so); without a
    ``\\u`` escape (non-ASCII written as ASCII) it is then what ``ensure_ascii=False`` writes too.
    """
    if not stored or stored[0] != "{":
        return "{}"
    if verbatim and "\\u" not in stored:
        return stored
    value = json.loads(stored)
    return _encode(value) if isinstance(value, dict) else "{}"


def verdicts_json(value: Any) -> str:
    """Stored verdicts (a JSON value, decoded) as a record writes them."""
    return _encode([v.to_dict() for v in _verdicts(value)]) if value else "[]"


def rpc_id_json(stored: str) -> str:
    """A stored ``rpc_id`` (the id as JSON text) as a record writes it: ``json.loads`` and back, quickly
    where that is the stored text itself (a whole number, or a string with no escape)."""
    if not stored:
        return "null"
    if stored.isascii():
        if stored.isdigit() and (stored[0] != "0" or stored == "0"):
            return stored
        if stored[0] == '"' == stored[-1] and stored.count('"') == 2 and "\\" not in stored:
            return stored
    return _encode(stored_rpc_id(stored))


def stored_rpc_id(stored: str) -> Any:
    """A stored ``rpc_id`` back as the id. One longer than ``RPC_ID_CHARS`` was stored cut short, no
    longer JSON: it comes back as that text (the whole id is in the frame's bytes)."""
    try:
        return json.loads(stored)
    except ValueError:
        return stored


def record_text(
    seq: int,
    kind: str,
    direction: str,
    wall: float,
    mono: float,
    raw: bytes,
    transport: str,
    parse_error: str,
    rpc_kind: str,
    method: str,
    rpc_id: str,
    verdicts: str,
    pair_seq: int | None,
    latency_ms: float | None,
    note: str,
) -> str:
    """One JSON Lines record, as ``record_line`` writes it, from a row's values: ``transport``,
    ``rpc_id`` and ``verdicts`` already as the record writes them (``transport_json``, ``rpc_id_json``,
    ``verdicts_json``)."""
    try:
        text, encoding = raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = raw.decode("latin-1"), "latin-1"
    # Inline, the common cases (a finite float, an int, None, "") spare a call each.
    finite = float.__repr__
    return (
        f'{{"seq": {seq if type(seq) is int else _json_number(seq)}, "kind": {_string(kind)}, '
        f'"direction": {_string(direction)}, '
        f'"wall": {finite(wall) if type(wall) is float and wall - wall == 0 else _json_number(wall)}, '
        f'"mono": {finite(mono) if type(mono) is float and mono - mono == 0 else _json_number(mono)}, '
        f'"size": {len(raw)}, "raw": {_string(text)}, "raw_encoding": "{encoding}", '
        f'"transport": {transport}, '
        f'"parse_error": {_string(parse_error) if parse_error else "null"}, '
        f'"rpc_kind": {_string(rpc_kind) if rpc_kind else "null"}, '
        f'"method": {_string(method) if method else "null"}, "rpc_id": {rpc_id}, "verdicts": {verdicts}, '
        f'"pair_seq": {"null" if pair_seq is None else _json_number(pair_seq)}, '
        f'"latency_ms": {"null" if latency_ms is None else _json_number(latency_ms)}, '
        f'"note": {_string(note) if note else "null"}}}\n'
    )


def _number(record: dict[str, Any], name: str, line: int, low: float, high: float) -> float | None:
    """A record's optional number field, finite and within [low, high]; ``RecordError`` otherwise."""
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(f"line {line}: {name} must be a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if not (math.isfinite(number) and low <= number <= high):
        raise RecordError(f"line {line}: {name} {str(value)[:40]} is out of range")
    return number


def deeper_than(value: dict[str, Any] | list[Any], limit: int) -> bool:
    """Whether a JSON object or array nests more than ``limit`` levels (iterative: any depth is safe)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _one_of(value: Any, choices: frozenset[str]) -> bool:
    return isinstance(value, str) and value in choices


def _seq(value: Any) -> int | None:
    """A frame number: a whole number from 1 to 2⁶³-1 (the column's range), else ``None``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SEQ
    return value if ok else None


def _raw(record: dict[str, Any], line: int) -> bytes:
    """A record's bytes: its ``raw`` text in its ``raw_encoding`` (what ``Frame.to_dict`` wrote)."""
    raw, encoding = record.get("raw") or "", record.get("raw_encoding") or "utf-8"
    if not isinstance(raw, str):
        raise RecordError(f"line {line}: raw must be text")
    if encoding not in ENCODINGS:
        raise RecordError(f"line {line}: raw_encoding must be utf-8 or latin-1, not {str(encoding)[:40]!r}")
    try:
        return raw.encode(encoding)
    except UnicodeEncodeError as exc:
        raise RecordError(
            f"line {line}: raw does not fit its raw_encoding {encoding} ({exc.reason})"
        ) from None


def frame_from_record(record: Any, line: int) -> Frame:
    """Read one JSON Lines record back into an engine frame; ``RecordError`` names the line.

    Everything a page later shows or the database stores is checked here, so a recording is refused
    with a reason rather than stored half-way or stored in a shape that breaks its pages.
    """
    if not isinstance(record, dict):
        raise RecordError(f"line {line}: expected a JSON object (a frame)")
    if deeper_than(record, MAX_DEPTH):
        raise RecordError(f"line {line}: nested more than {MAX_DEPTH} levels deep")
    kind, direction, seq = record.get("kind"), record.get("direction"), _seq(record.get("seq"))
    if not (_one_of(kind, KINDS) and _one_of(direction, DIRECTIONS) and seq is not None):
        raise RecordError(f"line {line}: not a frame (needs seq from 1 to {MAX_SEQ}, a kind and a direction)")
    rpc_kind = record.get("rpc_kind") or None
    if rpc_kind is not None and not _one_of(rpc_kind, RPC_KINDS):
        raise RecordError(f"line {line}: rpc_kind must be one of {', '.join(sorted(RPC_KINDS))}")
    wall = _number(record, "wall", line, 0.0, MAX_WALL)
    mono = _number(record, "mono", line, -math.inf, math.inf)
    latency = _number(record, "latency_ms", line, 0.0, math.inf)
    rpc_id = record.get("rpc_id")
    return Frame(
        cast(Any, kind),  # one of KINDS and DIRECTIONS, checked above
        cast(Any, direction),
        _raw(record, line),
        transport=record["transport"] if isinstance(record.get("transport"), dict) else {},
        wall=wall or 0.0,
        mono=mono or 0.0,
        seq=seq,
        parse_error=str(record["parse_error"]) if record.get("parse_error") else None,
        rpc_kind=rpc_kind,
        method=str(record["method"]) if record.get("method") else None,
        rpc_id=rpc_id if isinstance(rpc_id, int | str) and not isinstance(rpc_id, bool) else None,
        verdicts=_verdicts(record.get("verdicts")),
        pair_seq=_seq(record.get("pair_seq")),
        latency_ms=latency,
        note=str(record["note"]) if record.get("note") else None,
    )
