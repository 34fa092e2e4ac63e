"""Indexes that fit the session page's queries, so that none reads every frame of a big session.

The frame's lone index on its session goes (every index of the table starts with the session, the
unique (session, seq) too): dropped in place, where Django's AlterField would copy the whole table on
SQLite.
"""

import django.db.models.deletion
from django.db import migrations, models


def _session_indexes(schema_editor, model):
    column = model._meta.get_field("session").column
    return schema_editor._constraint_names(
        model, [column], index=True, unique=False, primary_key=False, type_=models.Index.suffix
    )


def drop_session_index(apps, schema_editor):
    model = apps.get_model("mcp_sessions", "TimelineFrame")
    for name in _session_indexes(schema_editor, model):
        schema_editor.execute(schema_editor._delete_index_sql(model, name))


def restore_session_index(apps, schema_editor):
    model = apps.get_model("mcp_sessions", "TimelineFrame")
    if not _session_indexes(schema_editor, model):
        field = model._meta.get_field("session")
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_sessions", "0012_oauth"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="timelineframe",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="frames",
                        to="mcp_sessions.mcpsession",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_session_index, restore_session_index)],
        ),
        migrations.RemoveIndex(model_name="timelineframe", name="frame_method"),
        migrations.AddIndex(
            model_name="timelineframe",
            index=models.Index(
                fields=["session", "method", "direction", "kind", "rpc_kind"], name="frame_method_use"
            ),
        ),
        migrations.AddIndex(
            model_name="timelineframe",
            index=models.Index(fields=["session", "wall"], name="frame_wall"),
        ),
        migrations.AddIndex(
            model_name="timelineframe",
            index=models.Index(condition=~models.Q(worst=""), fields=["session", "seq"], name="frame_flagged"),
        ),
        migrations.AddIndex(
            model_name="timelineframe",
            index=models.Index(
                condition=models.Q(direction="in", latency_ms__isnull=False),
                fields=["session", "method", "latency_ms", "wall", "is_error", "seq", "direction"],
                name="frame_answer",
            ),
        ),
    ]
