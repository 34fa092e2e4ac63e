"""Columns computed when a frame is recorded (sessions/frames.py): is_error, uri, level; old frames backfilled."""

from __future__ import annotations

import json

from django.db import migrations, models
from django.db.models import Q

URI_METHODS = ("resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated")
LEVEL_METHODS = ("notifications/message", "logging/setLevel")


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    frame = apps.get_model("mcp_sessions", "TimelineFrame")
    frame.objects.filter(Q(rpc_kind="error") | Q(kind__in=("stderr", "exit"))).update(is_error=True)
    wanted = frame.objects.filter(
        Q(kind="message") & (Q(rpc_kind="result") | Q(method__in=URI_METHODS + LEVEL_METHODS))
    ).only("pk", "raw", "rpc_kind", "method")
    changed = []
    for row in wanted.iterator(chunk_size=2000):
        try:
            message = json.loads(bytes(row.raw))
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if row.rpc_kind == "result":
            result = message.get("result")
            row.is_error = isinstance(result, dict) and result.get("isError") is True
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        uri, level = params.get("uri"), params.get("level")
        row.uri = uri[:2000] if row.method in URI_METHODS and isinstance(uri, str) else ""
        row.level = level[:20] if row.method in LEVEL_METHODS and isinstance(level, str) else ""
        if row.is_error or row.uri or row.level:
            changed.append(row)
        if len(changed) >= 2000:
            frame.objects.bulk_update(changed, ["is_error", "uri", "level"])
            changed = []
    frame.objects.bulk_update(changed, ["is_error", "uri", "level"])


class Migration(migrations.Migration):
    dependencies = [("mcp_sessions", "0004_engine_workers")]

    operations = [
        migrations.AddField(
            model_name="timelineframe",
            name="is_error",
            field=models.BooleanField(
                default=False, help_text="an error response, a result with isError, stderr or an exit"
            ),
        ),
        migrations.AddField(
            model_name="timelineframe",
            name="uri",
            field=models.CharField(blank=True, help_text="the resource the frame names", max_length=2000),
        ),
        migrations.AddField(
            model_name="timelineframe",
            name="level",
            field=models.CharField(blank=True, help_text="the log level the frame carries", max_length=20),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
