"""Who is signed in, read on every request without the ORM's per-query work.

Every request finds who is signed in: Django's ``ModelBackend.get_user`` builds, compiles and runs
``User.objects.get(pk=…)``, about 0.4 ms of CPU here, most of it building and compiling the query
(issue 10: a tenth of the app's CPU for a tool call). ``Users.get_user`` runs the SELECT as SQL
through ``sessions.raw.one_row``, which makes the same instance with the ORM's own converters; what
it returns, and when it refuses (no such row, an inactive person), is ``ModelBackend``'s.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ValidationError
from django.db import router

from sessions.raw import one_row

__all__ = ["Users"]


class Users(ModelBackend):
    """``ModelBackend`` whose ``get_user`` reads the row as plain SQL."""

    def get_user(self, user_id: Any) -> Any:
        model = get_user_model()
        try:
            key = model._meta.pk.to_python(user_id)
        except (ValidationError, TypeError, ValueError):  # no pk at all: nobody
            return None
        sql = f"SELECT * FROM {model._meta.db_table} WHERE {model._meta.pk.column} = %s"
        user = one_row(model, sql, [key], router.db_for_read(model))
        return user if user is not None and self.user_can_authenticate(user) else None
