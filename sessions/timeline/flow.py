"""The message flow: a timeline's rows as a sequence diagram, each request joined to its answer.

Pure Python over the rows the timeline already reads (``sessions.frames.SUMMARY_FIELDS``): no
database here (``flow_window`` brings what a window needs from around it). A ``FlowState`` is fed
rows in seq order and gives each one its place in the diagram:

- its **lane**: a JSON-RPC message between the client and the server, an HTTP exchange, a message
  between an MCP Apps view and its host (the page), or the side lane (stderr, state, exit);
- its **pairs**: the frames it answers or that answer it (the engine's ``pair_seq``, or the id of a
  request still open, for a late answer or a batch);
- its **parent**: the client's call a server→client request (sampling, elicitation, roots, ping)
  or a notification came inside of, found, in order of certainty, by the HTTP stream that carried
  it (``POST #n``), by its progress token or the request it cancels, or, over stdio, by time (the
  newest call still open); its ``depth`` is its parent's plus one;
- how busy each side is: how many requests each still has to answer (the activation bars).

The state outlives a window: a live tab keeps feeding it what arrives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessions.engine import APP_MESSAGE_STATE

__all__ = ["MAX_DEPTH", "Call", "FlowItem", "FlowState", "batch_members", "json_id"]

MAX_DEPTH = 4  # deeper nesting is drawn at this depth
MAX_OPEN = 1000  # requests never answered are forgotten past this many, oldest first
RESPONSES = frozenset({"result", "error"})
_STREAM = re.compile(r"POST #(\d+)")
_TOKEN = r'"{}"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)'


@dataclass
class Call:
    """A request sent and not answered yet."""

    seq: int
    direction: str  # "out": the client asked the server; "in": the server asked the client
    rpc_id: str  # as stored: the id's JSON text
    method: str
    wall: float
    depth: int = 0
    parent: int | None = None
    root: int | None = None


@dataclass
class FlowItem:
    """Where a row goes in the diagram; the template draws it."""

    lane: str  # "message", "http", "app" or "side"
    shape: str  # request, response, error, notification, batch, invalid, http, stderr, state, exit
    pairs: list[int] = field(default_factory=list)
    latency_ms: float | None = None
    method: str = ""
    depth: int = 0
    parent: int | None = None
    root: int | None = None  # the outermost call of the group this row is in
    how: str = (
        ""  # how the parent was found (stream, progress, cancel, time), or "late": answers a call given up
    )
    ambiguous: int = 0  # with "time": how many calls were open (the newest is assumed)
    orphan: bool = False  # a response that answers no request we know of
    client_busy: int = 0  # requests the client still has to answer, after this row
    server_busy: int = 0  # requests the server still has to answer, after this row

    @property
    def client_bars(self) -> int:
        """Activation bars to draw on the client's lifeline (at most 3)."""
        return min(self.client_busy, 3)

    @property
    def server_bars(self) -> int:
        """Activation bars to draw on the server's lifeline (at most 3)."""
        return min(self.server_busy, 3)

    @property
    def why(self) -> str:
        """How this row was put inside its call, in words (for a tooltip)."""
        return {
            "stream": "on the HTTP stream of the call's POST",
            "progress": "its progress token names the call",
            "cancel": "it cancels the call",
            "time": "it came while the call was open"
            + (f" ({self.ambiguous} calls were open; the newest is assumed)" if self.ambiguous else ""),
            "late": "a late answer to a request given up",
        }.get(self.how, "")


def json_id(value: Any) -> str:
    """An id as the timeline stores it (its JSON text), or "" if it cannot be one."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return ""
    return json.dumps(value)


def _field_of(preview: str, name: str) -> str:
    """A string or number field of a (possibly cut) preview, as JSON id text; "" if absent."""
    match = re.search(_TOKEN.format(re.escape(name)), preview)
    if match is None:
        return ""
    try:
        return json_id(json.loads(match.group(1)))
    except ValueError:
        return ""


def batch_members(raw: bytes) -> list[tuple[str, str]]:
    """The (kind, id) of each request and response in a batch's bytes: kind is request or response."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    members = []
    for element in message if isinstance(message, list) else []:
        if not isinstance(element, dict) or not json_id(element.get("id")):
            continue
        if isinstance(element.get("method"), str):
            members.append(("request", json_id(element["id"])))
        elif "result" in element or "error" in element:
            members.append(("response", json_id(element["id"])))
    return members


def _stream_of(row: Mapping[str, Any]) -> str:
    transport = row.get("transport")
    http = transport.get("http") if isinstance(transport, dict) else None
    stream = http.get("stream") if isinstance(http, dict) else None
    return stream if isinstance(stream, str) else ""


def _app_of(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``transport.app`` of a view↔host message row, or None."""
    transport = row.get("transport")
    if not isinstance(transport, dict) or transport.get("state") != APP_MESSAGE_STATE:
        return None
    app = transport.get("app")
    return app if isinstance(app, dict) else {}


def _remember(seen: dict[Any, int], key: Any, seq: int) -> None:
    """Keep ``key`` → ``seq``, forgetting the oldest past ``MAX_OPEN``."""
    seen[key] = seq
    if len(seen) > MAX_OPEN:
        del seen[next(iter(seen))]


def _other(direction: str) -> str:
    return "in" if direction == "out" else "out"


class FlowState:
    """The calls open so far and how they nest; ``feed`` places each new row."""

    def __init__(
        self,
        *,
        base: int = 0,
        answers: Mapping[int, tuple[int, float | None]] | None = None,
        batches: Mapping[int, list[tuple[str, str]]] | None = None,
    ) -> None:
        # The stored seq of this connection's frame 0: an HTTP stream names its request by the
        # engine's number, which restarts at each connection.
        self.base = base
        self.open: list[Call] = []
        # Answers found outside the rows fed (a request seq → its response's seq and latency).
        self.answers: dict[int, tuple[int, float | None]] = dict(answers or {})
        self.batches = dict(batches or {})
        # Requests their sender cancelled, by (direction, id): an answer may still come, late.
        self.given_up: dict[tuple[str, str], Call] = {}
        # A view's requests and the host's (by direction, view, id) not answered yet; and the client's
        # requests by id, for the host's answer to a view that names the request it caused.
        self.app_open: dict[tuple[str, str, str], int] = {}
        self.sent: dict[str, int] = {}

    def seed(self, calls: Iterable[Call]) -> None:
        """Calls opened before the rows to come and answered during or after them."""
        for call in calls:
            self._open(call)

    def feed(self, rows: Sequence[Mapping[str, Any]]) -> list[FlowItem]:
        """Place each row (in seq order); a row's answers later in ``rows`` are its pairs too."""
        later: dict[int, list[int]] = {}
        for row in rows:
            if row.get("pair_seq") is not None and row.get("rpc_kind") in RESPONSES:
                later.setdefault(int(row["pair_seq"]), []).append(int(row["seq"]))
        return [self._place(row, later) for row in rows]

    # --- one row ------------------------------------------------------------------------------

    def _place(self, row: Mapping[str, Any], later: dict[int, list[int]]) -> FlowItem:
        kind = row.get("kind")
        if kind == "http":
            return self._http(row)
        if kind == "state" and _app_of(row) is not None:
            return self._app(row)
        if kind != "message":
            if kind == "state" and _starts_connection(row):
                self.base = int(row["seq"]) - 1
            return self._busy(FlowItem("side", str(kind)))
        rpc_kind = str(row.get("rpc_kind") or "")
        if rpc_kind == "request":
            return self._request(row, later)
        if rpc_kind in RESPONSES:
            return self._response(row)
        if rpc_kind == "batch":
            return self._batch(row, later)
        if rpc_kind == "notification":
            return self._notification(row)
        return self._busy(FlowItem("message", "invalid"))

    def _http(self, row: Mapping[str, Any]) -> FlowItem:
        item = FlowItem("http", "http")
        transport = row.get("transport")
        http = transport.get("http") if isinstance(transport, dict) else None
        request_seq = http.get("request_seq") if isinstance(http, dict) else None
        stream = _STREAM.fullmatch(_stream_of(row).removesuffix(" (resumed)"))
        if isinstance(request_seq, int) and not isinstance(request_seq, bool):
            item.pairs = [self.base + request_seq]
        elif stream:  # an SSE event that carried no message: the request whose stream it came on
            item.pairs = [self.base + int(stream.group(1))]
        return self._busy(item)

    def _request(self, row: Mapping[str, Any], later: dict[int, list[int]]) -> FlowItem:
        seq, direction = int(row["seq"]), str(row["direction"])
        item = FlowItem("message", "request", method=str(row.get("method") or ""))
        if direction == "in":
            self._nest(item, row)
        item.pairs = list(later.get(seq, ()))
        if not item.pairs and seq in self.answers:
            item.pairs = [self.answers[seq][0]]
            item.latency_ms = self.answers[seq][1]
        call = Call(
            seq, direction, str(row.get("rpc_id") or ""), item.method, float(row.get("wall") or 0.0),
            depth=item.depth, parent=item.parent, root=item.root if item.root is not None else seq,
        )  # fmt: skip
        item.root = call.root
        self._open(call)
        if direction == "out" and call.rpc_id:
            _remember(self.sent, call.rpc_id, seq)
        return self._busy(item)

    def _response(self, row: Mapping[str, Any]) -> FlowItem:
        shape = "error" if row.get("rpc_kind") == "error" else "response"
        item = FlowItem("message", shape, method=str(row.get("method") or ""))
        item.latency_ms = row.get("latency_ms")
        pair = row.get("pair_seq")
        call = self._find(seq=int(pair)) if pair is not None else None
        late: Call | None = None
        if call is None and pair is None:
            # Not paired by the engine: the open request of that id, or a late answer to one given up.
            key = (_other(str(row["direction"])), str(row.get("rpc_id") or ""))
            call = self._find(rpc_id=key[1], direction=key[0])
            late = self.given_up.pop(key, None) if call is None else None
        if late is not None:
            item.pairs, item.how = [late.seq], "late"
            self._answered(item, late, row)
        elif call is not None:
            item.pairs = [call.seq]
            self._answered(item, call, row)
        elif pair is not None:
            item.pairs = [int(pair)]  # its request is before what was fed
        else:
            item.orphan = True
        return self._busy(item, closing=call)

    def _batch(self, row: Mapping[str, Any], later: dict[int, list[int]]) -> FlowItem:
        seq, direction = int(row["seq"]), str(row["direction"])
        item = FlowItem("message", "batch", pairs=list(later.get(seq, ())))
        closed: list[Call] = []
        for kind, rpc_id in self.batches.get(seq, ()):
            if kind == "response":
                call = self._find(rpc_id=rpc_id, direction=_other(direction))
                if call is not None:
                    item.pairs.append(call.seq)
                    closed.append(call)
            else:
                wall = float(row.get("wall") or 0.0)
                self._open(Call(seq, direction, rpc_id, "", wall, root=seq))
        item.client_busy, item.server_busy = self._counts()
        for call in closed:
            self.open.remove(call)
        return item

    def _app(self, row: Mapping[str, Any]) -> FlowItem:
        """A message between a view and its host: a request paired with its answer, and the host's
        answer with the request to the server the view's request caused."""
        app = _app_of(row) or {}
        direction, view, what = (
            str(app.get("direction") or ""),
            str(app.get("view") or ""),
            str(app.get("what") or ""),
        )
        seq = int(row["seq"])
        kind, _, answered = what.partition(" #")
        if kind in ("result", "error") and answered:
            item = FlowItem("app", "error" if kind == "error" else "response", method=what)
            asked = self.app_open.pop((_other(direction), view, answered), None)
            item.pairs = [asked] if asked is not None else []
            caused = self.sent.get(json_id(app.get("caused")))
            if caused is not None:
                item.pairs.append(caused)
            return self._busy(item)
        message_id = _field_of(str(row.get("preview") or ""), "id")
        if not message_id or not what:
            return self._busy(FlowItem("app", "notification" if what else "state", method=what))
        _remember(self.app_open, (direction, view, str(json.loads(message_id))[:40]), seq)
        return self._busy(FlowItem("app", "request", method=what))

    def _notification(self, row: Mapping[str, Any]) -> FlowItem:
        method = str(row.get("method") or "")
        item = FlowItem("message", "notification", method=method)
        preview = str(row.get("preview") or "")
        direction = str(row["direction"])
        parent: Call | None = None
        if method == "notifications/progress" and direction == "in":
            parent = self._find(rpc_id=_field_of(preview, "progressToken"), direction="out")
            item.how = "progress" if parent else ""
        elif method == "notifications/cancelled":
            # The sender cancels a request it sent itself.
            parent = self._find(rpc_id=_field_of(preview, "requestId"), direction=direction)
            item.how = "cancel" if parent else ""
        if parent is not None:
            self._under(item, parent)
            if item.how == "cancel":
                self._give_up(parent)
                return self._busy(item, closing=parent)
        elif direction == "in":
            self._nest(item, row, by_time=False)
        return self._busy(item)

    # --- nesting ------------------------------------------------------------------------------

    def _nest(self, item: FlowItem, row: Mapping[str, Any], *, by_time: bool = True) -> None:
        """Put what the server sent under the client's call that caused it, if one can tell."""
        stream = _stream_of(row)
        found = _STREAM.fullmatch(stream.removesuffix(" (resumed)"))
        if found:
            parent = self._find(seq=self.base + int(found.group(1)), direction="out")
            if parent is not None:
                item.how = "stream"
                self._under(item, parent)
            return
        if stream or not by_time:
            return  # the standalone GET stream carries what no request caused
        calls = [c for c in self.open if c.direction == "out"]
        if calls:
            item.how, item.ambiguous = "time", len(calls) if len(calls) > 1 else 0
            self._under(item, calls[-1])

    @staticmethod
    def _under(item: FlowItem, parent: Call) -> None:
        item.parent = parent.seq
        item.root = parent.root if parent.root is not None else parent.seq
        item.depth = min(parent.depth + 1, MAX_DEPTH)

    def _answered(self, item: FlowItem, call: Call, row: Mapping[str, Any]) -> None:
        item.depth, item.parent, item.root = call.depth, call.parent, call.root
        item.method = item.method or call.method
        if item.latency_ms is None and row.get("wall") is not None and call.wall:
            item.latency_ms = round((float(row["wall"]) - call.wall) * 1000, 3)

    # --- the open calls -----------------------------------------------------------------------

    def _open(self, call: Call) -> None:
        self.open.append(call)
        if len(self.open) > MAX_OPEN:
            del self.open[0]

    def _give_up(self, call: Call) -> None:
        self.given_up[(call.direction, call.rpc_id)] = call
        if len(self.given_up) > MAX_OPEN:
            del self.given_up[next(iter(self.given_up))]

    def _find(self, *, seq: int | None = None, rpc_id: str = "", direction: str = "") -> Call | None:
        """The newest open call with this seq, or with this id sent this way."""
        for call in reversed(self.open):
            if seq is not None and call.seq == seq and (not direction or call.direction == direction):
                return call
            if seq is None and rpc_id and call.rpc_id == rpc_id and call.direction == direction:
                return call
        return None

    def _counts(self) -> tuple[int, int]:
        client = sum(1 for c in self.open if c.direction == "in")
        return client, len(self.open) - client

    def _busy(self, item: FlowItem, *, closing: Call | None = None) -> FlowItem:
        # A call's bar reaches down to the row that answers it, then ends.
        item.client_busy, item.server_busy = self._counts()
        if closing is not None:
            self.open.remove(closing)
        return item


def _starts_connection(row: Mapping[str, Any]) -> bool:
    """The engine's first frame of a connection (its seq 1): "connecting", opening a transport."""
    transport = row.get("transport")
    state = transport.get("state") if isinstance(transport, dict) else None
    return state == "connecting" and str(row.get("note") or "").startswith("opening ")
