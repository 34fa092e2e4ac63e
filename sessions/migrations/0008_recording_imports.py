"""Recordings opened in the background: an importing status, the import's progress, the file's hash."""

from __future__ import annotations

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_sessions", "0007_frame_search"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpsession",
            name="import_progress",
            field=models.JSONField(
                blank=True, default=dict, help_text="while importing: frames stored, bytes read, the file's size"
            ),
        ),
        migrations.AddField(
            model_name="mcpsession",
            name="recording_sha256",
            field=models.CharField(
                blank=True, help_text="the recording file it was opened from (its SHA-256)", max_length=64
            ),
        ),
        migrations.AlterField(
            model_name="mcpsession",
            name="status",
            field=models.CharField(
                choices=[
                    ("starting", "Starting"),
                    ("connecting", "Connecting"),
                    ("initializing", "Initializing"),
                    ("ready", "Ready"),
                    ("expired", "Expired"),
                    ("closing", "Closing"),
                    ("closed", "Closed"),
                    ("failed", "Failed"),
                    ("lost", "Lost"),
                    ("importing", "Importing"),
                ],
                default="starting",
                max_length=20,
            ),
        ),
        migrations.AddIndex(
            model_name="mcpsession",
            index=models.Index(fields=["owner", "recording_sha256"], name="session_recording"),
        ),
    ]
