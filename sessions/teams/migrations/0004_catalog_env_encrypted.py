"""A catalog entry's fixed environment values (an admin's secrets: API keys, tokens) encrypted at rest
with INSPECTOR_SECRET_KEYS, as saved servers' are: the column becomes text, each row is encrypted in
place, then the field becomes the encrypted one. Reversible."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

import sessions.secrets

BATCH = 500


def _rewrite(apps: Any, schema_editor: Any, change: Any) -> None:
    manager = apps.get_model("teams", "catalogserver")._base_manager.using(schema_editor.connection.alias)
    changed = []
    for row in manager.only("pk", "env").iterator(chunk_size=BATCH):
        if row.env is not None:
            row.env = change(row.env)
        changed.append(row)
        if len(changed) == BATCH:
            manager.bulk_update(changed, ["env"])
            changed = []
    if changed:
        manager.bulk_update(changed, ["env"])


def encrypt_rows(apps: Any, schema_editor: Any) -> None:
    _rewrite(apps, schema_editor, sessions.secrets.encrypt)


def decrypt_rows(apps: Any, schema_editor: Any) -> None:
    _rewrite(apps, schema_editor, sessions.secrets.decrypt)


class Migration(migrations.Migration):
    dependencies = [("teams", "0003_sso_identity")]

    operations = [
        migrations.AlterField(model_name="catalogserver", name="env", field=models.TextField(blank=True)),
        migrations.RunPython(encrypt_rows, decrypt_rows),
        migrations.AlterField(
            model_name="catalogserver",
            name="env",
            field=sessions.secrets.EncryptedJSONField(blank=True, default=dict),
        ),
    ]
