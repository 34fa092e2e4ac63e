"""Saved servers, recorded MCP sessions, their timeline frames, and requests waiting for a person."""

from __future__ import annotations

import functools
import itertools
import json
import math
import operator
import sqlite3
import uuid
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, models

from sessions.engine import mask_headers
from sessions.frames import JSON_FIELDS, ROW_FIELDS, StoredVerdicts
from sessions.secrets import EncryptedJSONField, EncryptedTextField
from sessions.servers import DEFAULT_PROTOCOL_VERSION, TRANSPORTS

__all__ = [
    "Deployment",
    "EngineWorker",
    "McpSession",
    "OAuthAuthorization",
    "OAuthTokens",
    "PendingReview",
    "ServerConfig",
    "TimelineFrame",
]

SECRET_MASK = "••••••"


def wall_time(wall: float) -> datetime:
    """A frame's (or phase's) wall-clock seconds as an aware UTC datetime."""
    return datetime.fromtimestamp(wall, tz=UTC)


class ServerConfig(models.Model):
    """A server a person saved: how to reach it and how to talk to it."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="servers")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="server_configs",
        help_text="who saved it",
    )
    name = models.CharField(max_length=200)
    transport = models.CharField(max_length=10, choices=list(TRANSPORTS), default="stdio")
    command = models.CharField(max_length=1000, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = EncryptedJSONField(default=dict, blank=True)
    secret_env = models.JSONField(default=list, blank=True, help_text="names of env values to mask")
    cwd = models.CharField(max_length=1000, blank=True)
    url = models.CharField(max_length=2000, blank=True)
    headers = EncryptedJSONField(default=dict, blank=True)
    bearer_token = EncryptedTextField(blank=True)
    oauth = EncryptedJSONField(
        default=dict, blank=True, help_text="OAuth: enabled, client id and secret, metadata URL, scope"
    )
    verify_tls = models.BooleanField(default=True, help_text="check the server's TLS certificate")
    ca_file = models.CharField(max_length=1000, blank=True, help_text="PEM file of CA certificates to trust")
    protocol_version = models.CharField(max_length=20, default=DEFAULT_PROTOCOL_VERSION)
    mode = models.CharField(max_length=20, default="handshake", help_text="handshake, stateless or auto")
    capabilities = models.JSONField(default=dict, blank=True)
    timeout = models.FloatField(default=60.0)
    max_total_timeout = models.FloatField(default=600.0)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_server_name_per_team")]

    def __str__(self) -> str:
        return self.name

    def snapshot(self) -> dict[str, Any]:
        """Return the settings a session starts from (secrets included: only the runtime sees it)."""
        return {
            "name": self.name,
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "secret_env": list(self.secret_env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(self.headers),
            "bearer_token": self.bearer_token,
            # On unless turned off: a server saved before OAuth existed authorizes when it asks.
            "oauth": {"enabled": True, **dict(self.oauth or {})} if self.transport != "stdio" else {},
            "verify_tls": self.verify_tls,
            "ca_file": self.ca_file,
            "protocol_version": self.protocol_version,
            "mode": self.mode,
            "capabilities": dict(self.capabilities),
            "timeout": self.timeout,
            "max_total_timeout": self.max_total_timeout,
        }


def masked_config(config: dict[str, Any]) -> dict[str, Any]:
    """Return a config fit to show: bearer token, secret env values and credential headers masked."""
    shown = dict(config)
    secret = set(config.get("secret_env", []))
    shown["env"] = {k: SECRET_MASK if k in secret else v for k, v in config.get("env", {}).items()}
    shown["headers"] = mask_headers(config.get("headers", {}))
    shown["bearer_token"] = SECRET_MASK if config.get("bearer_token") else ""
    oauth = dict(config.get("oauth") or {})
    if oauth.get("client_secret"):
        oauth["client_secret"] = SECRET_MASK
    shown["oauth"] = oauth
    return shown


class McpSession(models.Model):
    """One recorded connection to an MCP server; live while its owner task runs."""

    class Status(models.TextChoices):
        STARTING = "starting"
        CONNECTING = "connecting"
        INITIALIZING = "initializing"
        READY = "ready"
        EXPIRED = "expired"
        CLOSING = "closing"
        CLOSED = "closed"
        FAILED = "failed"
        LOST = "lost"
        IMPORTING = "importing"  # opened from a recording, its frames still being stored

    # State frames that are steps of the lifecycle (shown as phases, and as the session's status note).
    # The engine's other state frames are notes on the timeline: a log level, a cancel over HTTP, a
    # listen stream ending, tools listed before a call.
    PHASES = frozenset({*Status.values, "discovering", "spawned"})

    LIVE = (
        Status.STARTING,
        Status.CONNECTING,
        Status.INITIALIZING,
        Status.READY,
        Status.EXPIRED,
        Status.CLOSING,
    )

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="sessions")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="mcp_sessions",
        help_text="who started it (or opened the recording)",
    )
    server = models.ForeignKey(ServerConfig, null=True, blank=True, on_delete=models.SET_NULL)
    name = models.CharField(max_length=200)
    config = EncryptedJSONField(default=dict)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.STARTING)
    status_note = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    ended = models.DateTimeField(null=True, blank=True)
    protocol_version = models.CharField(max_length=20, blank=True)
    mode = models.CharField(max_length=20, blank=True, help_text="handshake or stateless, as connected")
    transport_name = models.CharField(max_length=40, blank=True)
    server_info = models.JSONField(default=dict, blank=True)
    server_capabilities = models.JSONField(default=dict, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    instructions = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    worker_channel = models.CharField(max_length=200, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="the hosted engine worker that owns it")
    last_seq = models.BigIntegerField(default=0)
    roots = models.JSONField(default=list, blank=True)
    phases = models.JSONField(default=list, blank=True, help_text="lifecycle phases with their times")
    server_process = models.JSONField(
        default=dict, blank=True, help_text="the live stdio server, to kill its tree if the owner dies"
    )
    recording_sha256 = models.CharField(
        max_length=64, blank=True, help_text="the recording file it was opened from (its SHA-256)"
    )
    import_progress = models.JSONField(
        default=dict, blank=True, help_text="while importing: frames stored, bytes read, the file's size"
    )
    replay_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
        help_text="the session whose conversation this one sent again (Replay against…)",
    )
    replay_latency = models.BooleanField(
        default=True, help_text="a replay: whether a step that became slower counts as a change"
    )

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["team", "recording_sha256"], name="session_recording")]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def is_live(self) -> bool:
        return self.status in self.LIVE

    @property
    def group_name(self) -> str:
        return f"mcp-session-{self.public_id.hex}"

    @property
    def server_label(self) -> str:
        """What to call the server in the UI: its title, its name, or the session's name."""
        info = self.server_info if isinstance(self.server_info, dict) else {}
        return str(info.get("title") or info.get("name") or self.name)

    @property
    def is_imported(self) -> bool:
        """Opened from a recording file: there is no server to reconnect to."""
        return bool(isinstance(self.config, dict) and self.config.get("imported_from"))

    @property
    def offers_tools(self) -> bool:
        """The server declared the tools capability: a connected session's page opens on Tools."""
        caps = self.server_capabilities
        return isinstance(caps, dict) and "tools" in caps

    @property
    def is_tap(self) -> bool:
        """Watched through ``mcp-inspector tap``: the host drives it, the inspector only records."""
        return self.transport_name == "tap"

    @property
    def shown_config(self) -> dict[str, Any]:
        return masked_config(self.config)

    @property
    def start_wall(self) -> float:
        """When the session started, in wall-clock seconds: its first phase (a recording's own time),
        else when it was made. Timeline rows show their time relative to it."""
        for phase in self.phases if isinstance(self.phases, list) else ():
            if isinstance(phase, dict) and isinstance(phase.get("wall"), int | float):
                return float(phase["wall"])
        return self.created.timestamp() if self.created else 0.0


class EngineWorker(models.Model):
    """A hosted process that owns live sessions: an engine worker, or a web process recording tap
    endpoints' traffic; alive while its heartbeat is fresh (see sessions/runtime/workers.py)."""

    class Role(models.TextChoices):
        ENGINE = "engine", "engine worker"
        WEB = "web", "web process"

    name = models.CharField(max_length=200, unique=True)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.ENGINE)
    """Only engine workers take sessions to start; a web process beats for its tap sessions alone."""
    started = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(db_index=True)
    problem = models.TextField(blank=True, default="")
    """Why it cannot take commands now (its channel layer unreachable); empty while it can."""

    def __str__(self) -> str:
        return self.name


class Deployment(models.Model):
    """This deployment's own random key, made at its first start: what tells it apart from another
    deployment on the same Redis (its channel and group names carry it)."""

    key = models.CharField(max_length=32, unique=True)

    def __str__(self) -> str:
        return self.key

    @classmethod
    def own_key(cls) -> str:
        """The key, made on first use (whichever process comes first; the others read it)."""
        row = cls.objects.order_by("pk").first()
        if row is None:
            row, _ = cls.objects.get_or_create(pk=1, defaults={"key": uuid.uuid4().hex})
        return row.key


class TimelineFrame(models.Model):
    """One frame of a session's timeline, as the engine recorded it; ``seq`` orders them."""

    # Not indexed alone: every index below starts with the session (unique_frame_seq too).
    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="frames", db_index=False)
    seq = models.BigIntegerField()
    kind = models.CharField(max_length=10)
    direction = models.CharField(max_length=5)
    wall = models.FloatField()
    mono = models.FloatField()
    method = models.CharField(max_length=200, blank=True)
    rpc_id = models.CharField(max_length=200, blank=True)
    rpc_kind = models.CharField(max_length=20, blank=True)
    pair_seq = models.BigIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    size = models.BigIntegerField(default=0)
    raw = models.BinaryField(default=b"")
    preview = models.CharField(max_length=300, blank=True)
    parse_error = models.TextField(blank=True)
    transport = models.JSONField(default=dict, blank=True)
    verdicts = models.JSONField(default=list, blank=True)
    worst = models.CharField(
        max_length=10, blank=True, help_text="the most severe verdict: error, warning, info"
    )
    note = models.TextField(blank=True)
    # Computed once when the frame is recorded (sessions/frames.py), so queries need not parse previews.
    is_error = models.BooleanField(
        default=False, help_text="an error response, a result with isError, stderr or an exit"
    )
    uri = models.CharField(max_length=2000, blank=True, help_text="the resource the frame names")
    level = models.CharField(max_length=20, blank=True, help_text="the log level the frame carries")

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="unique_frame_seq")]
        # A session's page reads its 100,000th frame as fast as its 100th: each query it makes finds its
        # frames through one of these, never by reading every row
        # (tests/timeline/test_big_session_queries.py).
        indexes = [
            # A method's frames; and with the rest, the capability table's count of each method's use
            # (capabilities.usage_counts) read from the index alone.
            models.Index(
                fields=["session", "method", "direction", "kind", "rpc_kind"], name="frame_method_use"
            ),
            # A method's newest frames (the newest listing's pages, a method's newest result), walked
            # from the newest: by seq alone, a few tools/list frames were found by walking every frame.
            models.Index(fields=["session", "method", "seq"], name="frame_method_seq"),
            models.Index(fields=["session", "rpc_id"], name="frame_rpc_id"),
            # The lifecycle bar reads a session's state frames: a few among thousands of messages.
            models.Index(fields=["session", "seq"], condition=models.Q(kind="state"), name="frame_state"),
            # Frames per second (plots): counted from the index alone.
            models.Index(fields=["session", "wall"], name="frame_wall"),
            # The Conformance report's verdicts: the flagged frames, few among many.
            models.Index(fields=["session", "seq"], condition=~models.Q(worst=""), name="frame_flagged"),
            # Answers with their latency (the report's latency table, the plots), by method and latency.
            models.Index(
                fields=["session", "method", "latency_ms", "wall", "is_error", "seq", "direction"],
                condition=models.Q(direction="in", latency_ms__isnull=False),
                name="frame_answer",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.direction} {self.method or self.kind}"

    @classmethod
    def insert_rows(cls, session_pk: int, rows: list[dict[str, Any]]) -> None:
        """Insert frame rows (``sessions.frames.frame_row``) of a session, a few hundred per statement.

        Not bulk_create: building model instances costs 8x the insert itself. On SQLite, not
        executemany either: it gives the GIL up and takes it back for every row, and while the event
        loop is busy taking in a flood, each take waits for it; the recorder fell behind by tens of
        thousands of frames. One statement of many rows gives it up once for all of them.

        Binding runs under the GIL, and sqlite3 binds an int, a float, a str or a bytearray as it is
        but first looks for an adapter for anything else (a tuple built, a dict and two attribute
        lookups): on SQLite a row goes with ``is_error`` as 0 or 1, ``raw`` (up to 64 KiB) as a
        bytearray and a missing ``pair_seq`` or ``latency_ms`` as NaN, which SQLite stores as NULL.
        The same values are stored, in about half the binding time (a flood's frame has four such).
        """

        sqlite = connection.vendor == "sqlite"
        values = []
        for row in rows:
            value = [session_pk, *_row_values(row)]
            for at in _JSON_AT:  # most frames have no verdicts and little transport: no encoder for those
                column = value[at]
                if isinstance(column, StoredVerdicts):
                    value[at] = column.json
                else:
                    value[at] = "{}" if column == {} else "[]" if column == [] else json.dumps(column)
            if sqlite:
                value[_IS_ERROR_AT] = 1 if value[_IS_ERROR_AT] else 0
                if len(raw := value[_RAW_AT]) <= _COPIED_RAW:  # a copy, where it costs less than the lookup
                    value[_RAW_AT] = bytearray(raw)
                if value[_PAIR_SEQ_AT] is None:
                    value[_PAIR_SEQ_AT] = _NULL
                if value[_LATENCY_AT] is None:
                    value[_LATENCY_AT] = _NULL
            values.append(value)
        if not sqlite:
            with connection.cursor() as cursor:
                cursor.executemany(_insert_sql(), values)
            return
        connection.ensure_connection()
        step = _rows_per_statement()
        with connection.wrap_database_errors:
            for at in range(0, len(values), step):
                # sqlite3's own execute: Django's would rewrite thousands of %s into ? for each statement.
                connection.connection.execute(*_sqlite_insert(values[at : at + step]))

    @property
    def text(self) -> str:
        return bytes(self.raw).decode("utf-8", errors="replace")

    @property
    def when(self) -> datetime:
        return wall_time(self.wall)


_row_values = operator.itemgetter(*ROW_FIELDS)  # a row's columns in order, in one C call
_JSON_AT = [1 + i for i, name in enumerate(ROW_FIELDS) if name in JSON_FIELDS]  # after the session
_IS_ERROR_AT, _RAW_AT, _PAIR_SEQ_AT, _LATENCY_AT = (
    1 + ROW_FIELDS.index(name) for name in ("is_error", "raw", "pair_seq", "latency_ms")
)
_TEXT_FIELDS = (
    "kind", "direction", "method", "rpc_id", "rpc_kind", "preview", "parse_error", "transport", "verdicts",
    "worst", "note", "uri", "level",
)  # fmt: skip
_COPIED_RAW = 1 << 16
_NULL = math.nan  # bound as a float (no adapter looked for), stored by SQLite as NULL


@functools.cache
def _insert_head() -> tuple[str, int]:
    """``INSERT INTO … (columns)`` of TimelineFrame rows (the session, then the fields frame_row()
    produces), and how many columns that is."""
    meta, quote = TimelineFrame._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in ("session", *ROW_FIELDS)]
    columns = [quote(str(getattr(field, "column", ""))) for field in fields]
    return f"INSERT INTO {quote(meta.db_table)} ({', '.join(columns)})", len(columns)


def _insert_sql() -> str:
    """INSERT of one TimelineFrame row, ``%s`` for each column (executemany's)."""
    head, count = _insert_head()
    return f"{head} VALUES ({', '.join(['%s'] * count)})"


# Columns a statement binds once when every row of it has the same value: the session, and the text
# columns and is_error (0/1), whose values compare equal only when they are the same value and type.
_SHARED_CANDIDATES = (
    0,
    *(1 + i for i, name in enumerate(ROW_FIELDS) if name in _TEXT_FIELDS + ("is_error",)),
)


def _sqlite_insert(chunk: list[list[Any]]) -> tuple[str, list[Any]]:
    """The INSERT of rows of column values (the session first), and its parameters.

    sqlite3 binds each text with a copy SQLite allocates under the GIL: a
    flood's rows differ in a few columns (seq, times, bytes, preview) and repeat a dozen texts. A
    column whose value every row shares is bound once, in ``INSERT … SELECT ?, column1, … FROM
    (VALUES …)``; the same values are stored.
    """
    rows = len(chunk)
    columns = list(zip(*chunk, strict=True))
    shared = tuple(i for i in _SHARED_CANDIDATES if columns[i].count(columns[i][0]) == rows)
    varying = [column for i, column in enumerate(columns) if i not in shared]
    params = [columns[i][0] for i in shared]
    params += itertools.chain.from_iterable(zip(*varying, strict=True))
    return _shared_insert_sql(rows, shared), params


@functools.lru_cache(maxsize=256)
def _shared_insert_sql(rows: int, shared: tuple[int, ...]) -> str:
    """INSERT of ``rows`` rows whose columns at ``shared`` (0: the session) are one parameter each."""
    head, count = _insert_head()
    picked, varying = [], 0
    for at in range(count):
        if at in shared:
            picked.append("?")  # numbered before those in VALUES: they come first in the text
        else:
            varying += 1
            picked.append(f"column{varying}")
    marks = "(" + ", ".join(["?"] * varying) + ")"
    return f"{head} SELECT {', '.join(picked)} FROM (VALUES {', '.join([marks] * rows)})"


def _rows_per_statement() -> int:
    """Rows in one SQLite INSERT: 256, or fewer where SQLite allows fewer parameters (999 before 3.32)."""
    most = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(256, most // (1 + len(ROW_FIELDS))))


class PendingReview(models.Model):
    """A server→client request (sampling, elicitation) waiting for a person, and how it ended."""

    class Status(models.TextChoices):
        WAITING = "waiting"
        ANSWERED = "answered"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"
        FAILED = "failed"

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="reviews")
    key = models.CharField(max_length=200)
    method = models.CharField(max_length=100)
    rpc_id = models.CharField(max_length=200)
    params = models.JSONField(default=dict)
    frame_seq = models.BigIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.WAITING)
    answer = models.JSONField(null=True, blank=True)
    edited = models.BooleanField(default=False)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    detail = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    resolved = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created"]
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="unique_review_key")]

    def __str__(self) -> str:
        return f"{self.method} ({self.status})"

    @property
    def is_sampling(self) -> bool:
        return self.method == "sampling/createMessage"

    @property
    def is_url_elicitation(self) -> bool:
        return self.method == "elicitation/create" and self.params.get("mode") == "url"

    def current_roots(self) -> list[Any]:
        """The session's roots as stored now (a live view's copy of the session may be older)."""
        roots = McpSession.objects.filter(pk=self.session_id).values_list("roots", flat=True).first()
        return list(roots or [])

    @property
    def suggested_answer(self) -> dict[str, Any]:
        """A starting point for the person's answer."""
        if self.method == "sampling/createMessage":
            return {
                "role": "assistant",
                "content": {"type": "text", "text": ""},
                "model": "human",
                "stopReason": "endTurn",
            }
        if self.is_url_elicitation:
            return {"action": "accept"}
        if self.method == "elicitation/create":
            properties = (self.params.get("requestedSchema") or {}).get("properties") or {}
            content = {
                k: v["default"] for k, v in properties.items() if isinstance(v, dict) and "default" in v
            }
            return {"action": "accept", "content": content}
        if self.method == "roots/list":
            return {"roots": self.current_roots()}
        return {}


class OAuthTokens(models.Model):
    """A team's tokens and client registrations for one server and client id (the engine's
    ``TokenStore``), encrypted; refreshed by the engine, forgotten on request."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="oauth_tokens")
    key = models.CharField(max_length=2100, help_text="the server's canonical URL and the client id")
    data = EncryptedJSONField(default=dict)
    authorized_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="unique_oauth_tokens_key")]

    def __str__(self) -> str:
        return self.key

    @staticmethod
    def key_for(url: str, client_id: str = "") -> str:
        """The store key of a server: its canonical URL, and the pre-registered client id if any."""
        from sessions.engine import canonical_resource

        return f"{canonical_resource(url)} {client_id}".rstrip()


class OAuthAuthorization(models.Model):
    """An authorization waiting for the person who started it to come back through our callback.

    Only the ``state``'s SHA-256 is stored: the callback finds the row by it, once.
    """

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="authorizations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    state_sha256 = models.CharField(max_length=64, unique=True)
    url = models.TextField(help_text="the authorization URL the person opens")
    created = models.DateTimeField(auto_now_add=True)
    ended = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, blank=True, help_text="returned, expired or failed")

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"authorization for {self.session_id} ({self.outcome or 'waiting'})"

    @property
    def host(self) -> str:
        from urllib.parse import urlsplit

        return urlsplit(self.url).netloc

    @property
    def link(self) -> str:
        """The URL when it is a web address: anything else is never linked to, nor opened."""
        return self.url if self.url.startswith(("https://", "http://")) else ""
