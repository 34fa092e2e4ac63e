"""The capability table: one row per capability of the negotiated revision, who declared it, and its use.

``capability_rows`` is pure: the revision, both sides' declared capabilities (as the handshake or
discovery settled them), the client's connect toggles, and how many requests and notifications of
each method went each way (``usage_counts``: one statement, a range of an index per method). A row
whose use needs a declaration the other side never made is marked: a server request for a capability
the client did not declare, a notification the server did not declare, a client request for a
feature the server does not offer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Value

from sessions.models import McpSession, TimelineFrame
from sessions.servers import DEFAULT_PROTOCOL_VERSION
from sessions.timeline.queries import union_all

__all__ = ["CapabilityRow", "capability_rows", "toggles_of", "usage_counts"]

CLIENT, SERVER = "client", "server"
FIRST, LAST = "2024-11-05", "9999-12-31"
# Where a server -> client use is counted, and a client -> server one (TimelineFrame.direction).
IN, OUT = "in", "out"
# Object keys under which any name is a capability of its own (one row each, their settings not walked).
OPEN_SETS = frozenset({"experimental", "extensions"})
# Capabilities that are flags (declared when true), not objects.
FLAGS = frozenset({"listChanged", "subscribe"})
MAX_DEPTH = 5  # declared capabilities walked this deep (a hostile server may nest more)
MAX_ROWS = 200


@dataclass(frozen=True)
class Use:
    """A method whose requests or notifications count as a use of a capability."""

    direction: str
    method: str
    needs: str  # the side whose declaration allows it
    one: str
    many: str


@dataclass(frozen=True)
class Known:
    """A capability a revision defines: on which sides, from which revision to which, its uses."""

    path: str
    sides: tuple[str, ...]
    since: str = FIRST
    until: str = LAST
    uses: tuple[Use, ...] = ()


def _use(direction: str, method: str, needs: str, one: str, many: str = "") -> Use:
    return Use(direction, method, needs, one, many or f"{one}s")


# In the order the table shows them; a capability's sub-capabilities follow it.
KNOWN: tuple[Known, ...] = (
    Known("roots", (CLIENT,), uses=(_use(IN, "roots/list", CLIENT, "roots/list request"),)),
    Known(
        "roots.listChanged",
        (CLIENT,),
        until="2025-11-25",
        uses=(_use(OUT, "notifications/roots/list_changed", CLIENT, "list change sent"),),
    ),
    Known("sampling", (CLIENT,), uses=(_use(IN, "sampling/createMessage", CLIENT, "sampling request"),)),
    Known("sampling.context", (CLIENT,), since="2025-11-25"),
    Known("sampling.tools", (CLIENT,), since="2025-11-25"),
    Known(
        "elicitation",
        (CLIENT,),
        since="2025-06-18",
        uses=(_use(IN, "elicitation/create", CLIENT, "elicitation"),),
    ),
    Known("elicitation.form", (CLIENT,), since="2025-11-25"),
    Known("elicitation.url", (CLIENT,), since="2025-11-25"),
    Known(
        "logging",
        (SERVER,),
        uses=(
            _use(IN, "notifications/message", SERVER, "log message"),
            _use(OUT, "logging/setLevel", SERVER, "setLevel"),
        ),
    ),  # fmt: skip
    Known(
        "completions",
        (SERVER,),
        since="2025-03-26",
        uses=(_use(OUT, "completion/complete", SERVER, "completion"),),
    ),
    Known(
        "prompts",
        (SERVER,),
        uses=(
            _use(OUT, "prompts/list", SERVER, "prompts/list"),
            _use(OUT, "prompts/get", SERVER, "prompts/get"),
        ),
    ),  # fmt: skip
    Known(
        "prompts.listChanged",
        (SERVER,),
        uses=(_use(IN, "notifications/prompts/list_changed", SERVER, "list change"),),
    ),
    Known(
        "resources",
        (SERVER,),
        uses=(
            _use(OUT, "resources/list", SERVER, "resources/list"),
            _use(OUT, "resources/templates/list", SERVER, "templates/list"),
            _use(OUT, "resources/read", SERVER, "read"),
        ),
    ),  # fmt: skip
    Known(
        "resources.subscribe",
        (SERVER,),
        uses=(
            _use(OUT, "resources/subscribe", SERVER, "subscription"),
            _use(OUT, "resources/unsubscribe", SERVER, "unsubscription"),
            _use(IN, "notifications/resources/updated", SERVER, "update"),
        ),
    ),  # fmt: skip
    Known(
        "resources.listChanged",
        (SERVER,),
        uses=(_use(IN, "notifications/resources/list_changed", SERVER, "list change"),),
    ),
    Known(
        "tools",
        (SERVER,),
        uses=(
            _use(OUT, "tools/list", SERVER, "tools/list"),
            _use(OUT, "tools/call", SERVER, "call"),
        ),
    ),  # fmt: skip
    Known(
        "tools.listChanged",
        (SERVER,),
        uses=(_use(IN, "notifications/tools/list_changed", SERVER, "list change"),),
    ),
    # 2025-11-25 tasks: both sides may run tasks for the other (the client: sampling, elicitation).
    Known(
        "tasks",
        (CLIENT, SERVER),
        since="2025-11-25",
        until="2025-11-25",
        uses=(
            _use(OUT, "tasks/get", SERVER, "tasks/get"),
            _use(OUT, "tasks/result", SERVER, "tasks/result"),
            _use(IN, "tasks/get", CLIENT, "tasks/get from the server", "tasks/get from the server"),
        ),
    ),  # fmt: skip
    Known(
        "tasks.list",
        (CLIENT, SERVER),
        since="2025-11-25",
        until="2025-11-25",
        uses=(
            _use(OUT, "tasks/list", SERVER, "tasks/list"),
            _use(IN, "tasks/list", CLIENT, "tasks/list from the server", "tasks/list from the server"),
        ),
    ),  # fmt: skip
    Known(
        "tasks.cancel",
        (CLIENT, SERVER),
        since="2025-11-25",
        until="2025-11-25",
        uses=(
            _use(OUT, "tasks/cancel", SERVER, "tasks/cancel"),
            _use(IN, "tasks/cancel", CLIENT, "tasks/cancel from the server", "tasks/cancel from the server"),
        ),
    ),  # fmt: skip
    Known("tasks.requests", (CLIENT, SERVER), since="2025-11-25", until="2025-11-25"),
    Known("tasks.requests.sampling.createMessage", (CLIENT,), since="2025-11-25", until="2025-11-25"),
    Known("tasks.requests.elicitation.create", (CLIENT,), since="2025-11-25", until="2025-11-25"),
    Known("tasks.requests.tools.call", (SERVER,), since="2025-11-25", until="2025-11-25"),
    Known("experimental", (CLIENT, SERVER)),
    # The map is the 2026-07-28 schema's, yet hosts declare extensions in it on earlier revisions too
    # (MCP Apps on 2025-11-25): a declaration there is not one the revision fails to define.
    Known("extensions", (CLIENT, SERVER)),
)

# The connect form's client toggles (ServerConfig.capabilities), and the capability each declares.
# Absent toggles are on (sessions.servers.build_options).
TOGGLES: dict[str, tuple[str, ...]] = {
    "roots": ("roots",),
    "roots_list_changed": ("roots", "listChanged"),
    "sampling": ("sampling",),
    "sampling_tools": ("sampling", "tools"),
    "elicitation_form": ("elicitation", "form"),
    "elicitation_url": ("elicitation", "url"),
    "tasks": ("tasks",),
    "apps": ("extensions", "io.modelcontextprotocol/ui"),  # an extension's name holds dots
}


@dataclass
class CapabilityRow:
    """One capability: how deep it sits, what each side declared, the toggles, its use, any mismatch."""

    path: str
    name: str
    depth: int
    client: str = ""  # "declared", "not declared", or "" (not a capability of that side)
    server: str = ""
    value: Any = None  # a flag's or an open set member's declared value, when not an empty object
    known: bool = True  # defined by the revision (else declared by a side all the same)
    toggles: list[tuple[str, bool]] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)


def toggles_of(config: Any) -> dict[str, bool]:
    """The client toggles a session connected with (on unless its config turned them off)."""
    caps = config.get("capabilities") if isinstance(config, dict) else None
    caps = caps if isinstance(caps, dict) else {}
    return {name: caps.get(name, True) is not False for name in TOGGLES}


Path = tuple[str, ...]


def _lookup(caps: Any, path: Path) -> tuple[bool, Any]:
    """Whether a path is present in declared capabilities, and its value."""
    value = caps
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _declared(caps: Any, path: Path) -> bool:
    present, value = _lookup(caps, path)
    if not present:
        return False
    return value is True if path[-1] in FLAGS else value is not None and value is not False


def _walk(caps: Any, prefix: Path = (), depth: int = 0) -> list[Path]:
    """Every path declared in a capabilities object (members of open sets as leaves)."""
    if not isinstance(caps, dict) or depth >= MAX_DEPTH:
        return []
    paths: list[Path] = []
    for key in caps:
        path = (*prefix, str(key))
        paths.append(path)
        if key in OPEN_SETS and not prefix:
            if isinstance(caps[key], dict):
                paths.extend((*path, str(name)) for name in caps[key])
        else:
            paths.extend(_walk(caps[key], path, depth + 1))
    return paths


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _toggle_rows(
    known: Mapping[str, Known], toggles: Mapping[str, bool]
) -> dict[Path, list[tuple[str, bool]]]:
    """The toggles to show on each row (the capability each declares in this revision)."""
    rows: dict[Path, list[tuple[str, bool]]] = {}
    for name, path in TOGGLES.items():
        dotted = ".".join(path)
        if dotted not in known and path[0] == "elicitation" and "elicitation" in known:
            path = ("elicitation",)  # 2025-06-18: one elicitation capability, declared by either toggle
        member = len(path) == 2 and path[0] in OPEN_SETS and path[0] in known
        if (".".join(path) in known or member) and name in toggles:
            rows.setdefault(path, []).append((name, toggles[name]))
    return rows


def capability_rows(
    revision: str,
    client_caps: Any,
    server_caps: Any,
    toggles: Mapping[str, bool],
    usage: Mapping[tuple[str, str], int],
) -> list[CapabilityRow]:
    """The table's rows: the revision's capabilities, then whatever else either side declared.

    ``usage``: (direction, method) → how many requests or notifications went that way.
    """
    revision = revision or DEFAULT_PROTOCOL_VERSION
    known = {k.path: k for k in KNOWN if k.since <= revision <= k.until}
    defined = {tuple(k.split("."))[:i] for k in known for i in range(1, k.count(".") + 2)}
    sides: dict[Path, set[str]] = {}

    def add(path: Path, side: str) -> None:
        for i in range(1, len(path) + 1):
            sides.setdefault(path[:i], set()).add(side)

    for entry in known.values():
        for side in entry.sides:
            add(tuple(entry.path.split(".")), side)
    for side, caps in ((CLIENT, client_caps), (SERVER, server_caps)):
        for path in _walk(caps):
            add(path, side)
    # Children right after their parent, each level in the order first seen (dicts keep it).
    order = {path: i for i, path in enumerate(sides)}
    ordered = sorted(sides, key=lambda p: [order[p[:i]] for i in range(1, len(p) + 1)])[:MAX_ROWS]
    toggle_rows = _toggle_rows(known, toggles)
    for path in [p for p in toggle_rows if p not in sides and p[:1] in sides]:
        # An open set's member nobody declared (its toggle off): the toggle shows on the set's row.
        toggle_rows.setdefault(path[:1], []).extend(toggle_rows.pop(path))
    rows = []
    for path in ordered:
        dotted = ".".join(path)
        item = known.get(dotted)
        member = len(path) == 2 and path[0] in OPEN_SETS  # experimental.<name>: any name is fine
        row = CapabilityRow(dotted, path[-1], len(path) - 1, known=path in defined or member)
        row.toggles = toggle_rows.get(path, [])
        for side, caps in ((CLIENT, client_caps), (SERVER, server_caps)):
            if side in sides[path]:
                setattr(row, side, "declared" if _declared(caps, path) else "not declared")
            present, value = _lookup(caps, path)
            if present and not isinstance(value, dict) and value is not True and path[-1] not in FLAGS:
                row.value = value
        for use in item.uses if item is not None else ():
            n = usage.get((use.direction, use.method), 0)
            if not n:
                continue
            row.used.append(_count(n, use.one, use.many))
            if not _declared(client_caps if use.needs == CLIENT else server_caps, path):
                who = "the server" if use.direction == IN else "the client"
                row.mismatches.append(
                    f"{who} sent {use.method} ×{n} though the {use.needs} did not declare {dotted}"
                )
        rows.append(row)
    return rows


def usage_counts(session: McpSession, frames: Any = None) -> dict[tuple[str, str], int]:
    """How many requests and notifications of each method the table shows went each way (the
    non-zero counts only), in one statement: each (direction, method) counted over its own range of
    the ``frame_method_use`` index (``UNION ALL``), so no other method's frames are walked (a busy
    session's tool results, progress and log lines are most of its frames)."""
    found = TimelineFrame.objects.filter(session=session) if frames is None else frames
    # One pair's count, compiled once: its direction, method and number are stand-ins, replaced pair by pair.
    pair = (
        found.filter(kind="message", rpc_kind__in=("request", "notification"), direction=_WAY, method=_METHOD)
        .order_by()
        .annotate(x=Value(_PAIR))
        .values("x")
        .annotate(n=Count("pk"))
        .values_list("x", "n")
    )
    counted = union_all(
        pair, (_WAY, _METHOD, _PAIR), [(way, method, x) for x, (way, method) in enumerate(USED)]
    )
    return {USED[x]: n for x, n in counted if n}


# Every (direction, method) a row of the table counts, and stand-ins for one in the compiled count.
USED = sorted({(use.direction, use.method) for item in KNOWN for use in item.uses})
_WAY, _METHOD, _PAIR = "\x00way stand-in", "\x00method stand-in", -1234567890
