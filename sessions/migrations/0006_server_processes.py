"""McpSession.server_process: the live stdio server's pid, start time and marker, for the reaper."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_sessions", "0005_frame_query_columns"),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpsession",
            name="server_process",
            field=models.JSONField(
                blank=True, default=dict, help_text="the live stdio server, to kill its tree if the owner dies"
            ),
        ),
    ]
