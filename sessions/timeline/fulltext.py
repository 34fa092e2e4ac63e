"""Full-text conditions over the whole of a frame: SQLite FTS5 or PostgreSQL text search.

Migration 0007 sets up both (what a frame's text is, and why SQLite indexes at search time). A
word matches words that begin with it; a quoted phrase matches those words in that order.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

__all__ = ["catch_up", "matches"]

FRAMES = "mcp_sessions_timelineframe"
INDEX = "mcp_sessions_frame_search"  # SQLite: FTS5, rowid = the frame's id
TEXT = "mcp_sessions_frame_text"  # SQLite: the view of each frame's text
BIG = 100_000  # PostgreSQL: the bytes of a frame its index holds (migration 0007)
CHUNK = 2000  # frames indexed per write transaction, so the recorder never waits long


def matches(text: str, *, phrase: bool) -> Q:
    """Frames whose text holds ``text``: a word, as a prefix, or a phrase, in that order."""
    if connection.vendor == "postgresql":
        # A quoted tsquery literal: the parser splits it into lexemes as it split the frames.
        literal = "'" + text.replace("\\", " ").replace("'", "''") + "'" + ("" if phrase else ":*")
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        # The index holds a frame's first BIG bytes; past them the frame's bytes are read, as ASCII
        # (any case): a word with other characters is found there only by the index.
        return Q(
            RawSQL(
                f'(mcp_frame_search_vector("{FRAMES}"."raw", "{FRAMES}"."note") @@ to_tsquery(\'simple\', %s)'
                f' OR ("{FRAMES}"."size" > {BIG} AND encode("{FRAMES}"."raw", \'escape\') ILIKE %s))',
                [literal, pattern],
                output_field=BooleanField(),
            )
        )
    if connection.vendor == "sqlite":
        fts = '"' + text.replace('"', '""') + '"' + ("" if phrase else "*")
        return Q(pk__in=RawSQL(f"SELECT rowid FROM {INDEX} WHERE {INDEX} MATCH %s", [fts]))
    return Q(raw__icontains=text.encode()) | Q(note__icontains=text)  # no index: a slow scan


def catch_up() -> int:
    """SQLite: index the frames recorded since the last search; returns how many."""
    if connection.vendor != "sqlite":
        return 0
    done = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid FROM {INDEX} ORDER BY rowid DESC LIMIT 1")
            row = cursor.fetchone()
            last = row[0] if row else 0
            cursor.execute(f"SELECT max(id) FROM {FRAMES}")
            newest = cursor.fetchone()[0] or 0
            if last > newest:
                # Ids were handed out again (a table rebuilt after its newest frames were deleted):
                # what the index says about them is stale. Start again.
                cursor.execute(f"INSERT INTO {INDEX}({INDEX}) VALUES ('delete-all')")
                last = 0
            cursor.execute(
                f"INSERT INTO {INDEX}(rowid, body) SELECT id, body FROM {TEXT} "
                f"WHERE id IN (SELECT id FROM {FRAMES} WHERE id > %s ORDER BY id LIMIT %s)",
                [last, CHUNK],
            )
            indexed = cursor.rowcount
        done += max(indexed, 0)
        if indexed < CHUNK:
            return done
