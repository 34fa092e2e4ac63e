"""Secrets at rest: saved servers' bearer token, environment and headers, and each session's config
snapshot (which holds the same secrets), encrypted with INSPECTOR_SECRET_KEYS (sessions/secrets.py).

Three steps: the columns become plain text (PostgreSQL's jsonb turns into its JSON text), every row
is encrypted in place, then the fields become the encrypted ones (the same text column). Reversible:
backwards, every row is decrypted before the columns turn into JSON again.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

import sessions.secrets

# model → fields holding secrets, and whether each holds JSON (text otherwise).
SECRET_FIELDS = {
    "serverconfig": {"bearer_token": False, "env": True, "headers": True},
    "mcpsession": {"config": True},
}
BATCH = 500


def _rewrite(apps: Any, schema_editor: Any, change: Any) -> None:
    for model_name, fields in SECRET_FIELDS.items():
        model = apps.get_model("mcp_sessions", model_name)
        manager = model._base_manager.using(schema_editor.connection.alias)
        changed = []
        for row in manager.only("pk", *fields).iterator(chunk_size=BATCH):
            for name in fields:
                value = getattr(row, name)
                if value is not None:
                    setattr(row, name, change(value))
            changed.append(row)
            if len(changed) == BATCH:
                manager.bulk_update(changed, list(fields))
                changed = []
        if changed:
            manager.bulk_update(changed, list(fields))


def encrypt_rows(apps: Any, schema_editor: Any) -> None:
    # The JSON columns read as their JSON text here: the encrypted JSON field decrypts to that text.
    def change(value: str) -> str:
        return sessions.secrets.encrypt(value)

    _rewrite(apps, schema_editor, change)


def decrypt_rows(apps: Any, schema_editor: Any) -> None:
    def change(value: str) -> str:
        return sessions.secrets.decrypt(value)

    _rewrite(apps, schema_editor, change)


def _as_text(model_name: str, name: str) -> migrations.AlterField:
    return migrations.AlterField(model_name=model_name, name=name, field=models.TextField(blank=True))


class Migration(migrations.Migration):
    dependencies = [("mcp_sessions", "0009_teams")]

    operations = [
        _as_text("mcpsession", "config"),
        _as_text("serverconfig", "bearer_token"),
        _as_text("serverconfig", "env"),
        _as_text("serverconfig", "headers"),
        migrations.RunPython(encrypt_rows, decrypt_rows),
        migrations.AlterField(
            model_name="mcpsession",
            name="config",
            field=sessions.secrets.EncryptedJSONField(default=dict),
        ),
        migrations.AlterField(
            model_name="serverconfig",
            name="bearer_token",
            field=sessions.secrets.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="serverconfig",
            name="env",
            field=sessions.secrets.EncryptedJSONField(blank=True, default=dict),
        ),
        migrations.AlterField(
            model_name="serverconfig",
            name="headers",
            field=sessions.secrets.EncryptedJSONField(blank=True, default=dict),
        ),
    ]
