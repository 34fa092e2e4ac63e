"""Re-encrypt every stored secret with the newest key of INSPECTOR_SECRET_KEYS."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from sessions.secrets import SecretUnreadable, rotate_all


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret with the first key of INSPECTOR_SECRET_KEYS. Put a new key "
        "first (INSPECTOR_SECRET_KEYS=new,old) on every process, run this, then drop the old key."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rotated = rotate_all()
        except SecretUnreadable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"re-encrypted {rotated} stored secrets with the newest key")
