"""Full-text search over the whole of every frame (sessions/timeline/fulltext.py).

The text of a frame is its JSON decoded (keys and values, so ``\\n`` in a string separates words, and
``\\u00e9`` is é), or the bytes as they are when they are not JSON, then its note.

- SQLite: an FTS5 table without content of its own (rowid = the frame's id) and a view that says
  what a frame's text is. Frames are indexed when someone searches, not when they are recorded,
  so recording a flood costs nothing more; a trigger takes a deleted frame out of the index.
  Nothing to backfill: the first search indexes the frames that exist.
- PostgreSQL: an expression GIN index over an immutable function that never fails (text that is
  not UTF-8, a NUL, JSON that jsonb refuses all still index what they can), built for the existing
  rows as the index is created; frames over 100 KB are read past that by the search itself.
"""

from __future__ import annotations

from django.db import migrations

FRAMES = "mcp_sessions_timelineframe"

SQLITE_TEXT = """
CREATE VIEW mcp_sessions_frame_text AS
SELECT id, CASE
    WHEN json_valid(CAST(raw AS TEXT)) THEN (
        SELECT group_concat(
            CASE WHEN typeof(key) = 'text' THEN key || ' ' ELSE '' END || coalesce(atom, ''), ' '
        ) FROM json_tree(CAST(raw AS TEXT))
    )
    ELSE CAST(raw AS TEXT)
END || ' ' || note AS body
FROM mcp_sessions_timelineframe
"""

SQLITE = [
    "CREATE VIRTUAL TABLE mcp_sessions_frame_search USING fts5("
    "body, content='', tokenize='unicode61 remove_diacritics 2')",
    SQLITE_TEXT,
    # BEFORE, so the view still has the row; only frames already indexed are taken out.
    """
    CREATE TRIGGER mcp_sessions_frame_unsearch BEFORE DELETE ON mcp_sessions_timelineframe
    WHEN old.id <= coalesce(
        (SELECT rowid FROM mcp_sessions_frame_search ORDER BY rowid DESC LIMIT 1), 0
    )
    BEGIN
        INSERT INTO mcp_sessions_frame_search(mcp_sessions_frame_search, rowid, body)
        SELECT 'delete', id, body FROM mcp_sessions_frame_text WHERE id = old.id;
    END
    """,
]
SQLITE_UNDO = [
    "DROP TRIGGER IF EXISTS mcp_sessions_frame_unsearch",
    "DROP VIEW IF EXISTS mcp_sessions_frame_text",
    "DROP TABLE IF EXISTS mcp_sessions_frame_search",
]

# PostgreSQL caps a tsvector at 1 MB and word positions at 16,383: a frame over BIG bytes has its
# first BIG bytes indexed, and sessions/timeline/fulltext.py reads the rest of it (a partial index
# lists those frames, few and far between).
BIG = 100_000
POSTGRES = [
    rf"""
    CREATE FUNCTION mcp_frame_search_vector(raw bytea, note text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE
        body text;
        doc tsvector;
    BEGIN
        BEGIN
            body := convert_from(substring(raw FROM 1 FOR {BIG}), 'UTF8');
        EXCEPTION WHEN others THEN
            -- Not UTF-8 (or cut inside a character), or a NUL: its ASCII words stay findable.
            body := encode(substring(raw FROM 1 FOR {BIG}), 'escape');
        END;
        BEGIN
            doc := jsonb_to_tsvector('simple', body::jsonb, '["string", "numeric", "boolean", "key"]');
        EXCEPTION WHEN others THEN
            BEGIN
                doc := to_tsvector('simple', body);  -- not JSON (or cut short), or JSON jsonb refuses
            EXCEPTION WHEN others THEN
                doc := ''::tsvector;  -- over 1 MB: the reader of big frames finds its words
            END;
        END;
        RETURN doc || to_tsvector('simple', coalesce(note, ''));
    END
    $$
    """,
    f"CREATE INDEX frame_search ON {FRAMES} USING gin (mcp_frame_search_vector(raw, note))",
    f"CREATE INDEX frame_big ON {FRAMES} (id) WHERE size > {BIG}",
]
POSTGRES_UNDO = [
    "DROP INDEX IF EXISTS frame_big",
    "DROP INDEX IF EXISTS frame_search",
    "DROP FUNCTION IF EXISTS mcp_frame_search_vector(bytea, text)",
]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    for sql in {"sqlite": SQLITE, "postgresql": POSTGRES}.get(vendor, []):
        schema_editor.execute(sql)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    for sql in {"sqlite": SQLITE_UNDO, "postgresql": POSTGRES_UNDO}.get(vendor, []):
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("mcp_sessions", "0006_server_processes")]

    operations = [migrations.RunPython(create, drop)]
