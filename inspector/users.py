"""The signed-in person's row, read on every request with a statement compiled once.

Every request finds who is signed in: Django's ``ModelBackend.get_user`` builds, compiles and runs
``User.objects.get(pk=…)``, about 0.4 ms of CPU here, most of it building and compiling the query
(issue 10: a tenth of the app's CPU for a tool call). ``Users.get_user`` runs the same SELECT,
compiled by the ORM once per database, with the ORM's own converters, and makes the same instance
(``Model.from_db``); what it returns, and when it refuses (no such row, an inactive person), is
``ModelBackend``'s.
"""

from __future__ import annotations

import threading
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ValidationError
from django.db import connections, router

__all__ = ["Users"]

_compiled: dict[str, tuple[str, list[str], Any]] = {}  # alias → sql, field names, converters
_lock = threading.Lock()


def _statement(alias: str) -> tuple[str, list[str], Any]:
    with _lock:
        if alias not in _compiled:
            model = get_user_model()
            query = model._default_manager.using(alias).filter(pk=0).query
            compiler = query.get_compiler(using=alias)
            sql, params = compiler.as_sql()
            if list(params) != [0]:  # the pk must be its one parameter, or this is not that query
                raise RuntimeError(f"unexpected parameters for the user query: {params!r}")
            columns = [column for column, _, _ in compiler.select]
            names = [column.target.attname for column in columns]
            _compiled[alias] = (sql, names, compiler.get_converters(columns))
        return _compiled[alias]


class Users(ModelBackend):
    """``ModelBackend`` whose ``get_user`` runs a statement compiled once per database."""

    def get_user(self, user_id: Any) -> Any:
        model = get_user_model()
        try:
            key = model._meta.pk.to_python(user_id)
        except (ValidationError, TypeError, ValueError):  # no pk at all: nobody
            return None
        alias = router.db_for_read(model)
        sql, names, converters = _statement(alias)
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(sql, [key])
            row = cursor.fetchone()
        if row is None:
            return None
        values = list(row)
        for position, (functions, expression) in converters.items():  # as the compiler applies them
            for function in functions:
                values[position] = function(values[position], expression, connection)
        user = model.from_db(alias, names, values)
        return user if self.user_can_authenticate(user) else None
