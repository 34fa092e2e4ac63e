"""A frame as the database keeps it: the one row schema, its JSON Lines codec, and its query columns.

The engine's ``Frame`` is what happened on the wire. A stored row is that frame numbered within its
session, plus columns computed once, when the frame is recorded, so that queries never have to dig
into a truncated preview: ``is_error`` (an error response, a result with ``isError``, stderr, an
exit), ``uri`` (the resource a request or notification names) and ``level`` (a log level). JSON Lines
records (the export, ``--record``, "Open a recording") have one shape: ``Frame.to_dict()``.

Pure Python: the runtime, the read side and the tests all use it.
"""

from __future__ import annotations

import json
from typing import Any

from sessions.engine import Frame, Verdict

__all__ = [
    "JSON_FIELDS",
    "ROW_FIELDS",
    "SEVERITY_ORDER",
    "SUMMARY_FIELDS",
    "RecordError",
    "frame_from_record",
    "frame_of",
    "frame_row",
    "message_of",
    "params_of",
    "pretty_json",
    "record_line",
    "summary",
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


class RecordError(ValueError):
    """A JSON Lines record is not a frame."""


def message_of(raw: bytes | memoryview | str) -> dict[str, Any]:
    """A stored frame's JSON-RPC message, or ``{}`` when its bytes are not one JSON object."""
    try:
        message = json.loads(bytes(raw) if isinstance(raw, memoryview) else raw)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def params_of(raw: bytes | memoryview | str) -> dict[str, Any]:
    """A stored frame's params, or ``{}``."""
    params = message_of(raw).get("params")
    return params if isinstance(params, dict) else {}


def pretty_json(raw: bytes | memoryview) -> str:
    """A frame's bytes as indented JSON, or "" when they are not JSON."""
    try:
        return json.dumps(json.loads(bytes(raw)), indent=2, ensure_ascii=False)
    except ValueError:
        return ""


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
    return False, uri[:2000] if isinstance(uri, str) else "", level[:20] if isinstance(level, str) else ""


def frame_row(frame: Frame, base: int) -> dict[str, Any]:
    """Flatten an engine frame into the stored columns, numbered within the session from ``base``."""
    verdicts = [v.to_dict() for v in frame.verdicts]
    worst = min((v["severity"] for v in verdicts), key=SEVERITY_ORDER.__getitem__, default="")
    preview = frame.raw[:PREVIEW_CHARS].decode("utf-8", errors="replace").replace("\n", " ")
    if not preview and frame.note:
        preview = frame.note[:PREVIEW_CHARS]
    is_error, uri, level = _query_columns(frame)
    return {
        "seq": base + frame.seq,
        "kind": frame.kind,
        "direction": frame.direction,
        "wall": frame.wall,
        "mono": frame.mono,
        "method": frame.method or "",
        "rpc_id": json.dumps(frame.rpc_id) if frame.rpc_id is not None else "",
        "rpc_kind": frame.rpc_kind or "",
        "pair_seq": base + frame.pair_seq if frame.pair_seq is not None else None,
        "latency_ms": frame.latency_ms,
        "size": frame.size,
        "raw": frame.raw,
        "preview": preview,
        "parse_error": frame.parse_error or "",
        "transport": frame.transport,
        "verdicts": verdicts,
        "worst": worst,
        "note": frame.note or "",
        "is_error": is_error,
        "uri": uri,
        "level": level,
    }


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
    rpc_id = json.loads(row.rpc_id) if row.rpc_id else None
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


def frame_from_record(record: Any, line: int) -> Frame:
    """Read one JSON Lines record back into an engine frame; ``RecordError`` names the line."""
    if not isinstance(record, dict):
        raise RecordError(f"line {line}: expected a JSON object (a frame)")
    kind, direction, seq = record.get("kind"), record.get("direction"), record.get("seq")
    if kind not in KINDS or direction not in DIRECTIONS or not isinstance(seq, int) or seq < 1:
        raise RecordError(f"line {line}: not a frame (needs seq, kind and direction)")
    raw = record.get("raw") or ""
    if not isinstance(raw, str):
        raise RecordError(f"line {line}: raw must be text")
    encoding = "latin-1" if record.get("raw_encoding") == "latin-1" else "utf-8"
    rpc_id = record.get("rpc_id")
    pair = record.get("pair_seq")
    latency = record.get("latency_ms")
    return Frame(
        kind,
        direction,
        raw.encode(encoding),
        transport=record["transport"] if isinstance(record.get("transport"), dict) else {},
        wall=float(record["wall"]) if isinstance(record.get("wall"), int | float) else 0.0,
        mono=float(record["mono"]) if isinstance(record.get("mono"), int | float) else 0.0,
        seq=seq,
        parse_error=str(record["parse_error"]) if record.get("parse_error") else None,
        rpc_kind=str(record["rpc_kind"]) if record.get("rpc_kind") else None,
        method=str(record["method"]) if record.get("method") else None,
        rpc_id=rpc_id if isinstance(rpc_id, int | str) and not isinstance(rpc_id, bool) else None,
        verdicts=_verdicts(record.get("verdicts")),
        pair_seq=pair if isinstance(pair, int) else None,
        latency_ms=float(latency) if isinstance(latency, int | float) else None,
        note=str(record["note"]) if record.get("note") else None,
    )
