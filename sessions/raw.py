"""Model instances from a hand-written SELECT, without ``RawQuerySet``'s set-up on every query.

``Model.objects.raw(sql)`` works out, for every query it runs, which column is which field, the
database's converters for each, and the order ``Model.from_db`` needs; for the one-row lookups every
request makes (who is signed in, the session and the person's role in its team) that cost more than
the rest of the lookup (issue 10). ``one_row`` works it out once per model, database and column list,
then makes the same instance: each field converted as the ORM converts it, columns that are no field
of the model set as attributes, as ``raw()`` sets its annotations.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Model

__all__ = ["one_row"]

M = TypeVar("M", bound=Model)


@functools.cache
def _plan(model: type[Model], alias: str, columns: tuple[str, ...]) -> tuple[list[int], list[str], list[Any]]:
    """Where each field's column is, the fields' names in the model's order, and their converters."""
    at = {column: i for i, column in enumerate(columns)}
    connection = connections[alias]
    order, converters = [], []
    for field in model._meta.concrete_fields:
        if field.column not in at:
            raise ValueError(f"{model.__name__} needs the column {field.column!r}; the query has {columns}")
        order.append(at[field.column])
        expression = field.get_col(model._meta.db_table)
        functions = connection.ops.get_db_converters(expression) + field.get_db_converters(connection)  # type: ignore[attr-defined]
        if functions:
            converters.append((len(order) - 1, functions, expression))
    extras = [column for column in columns if column not in {f.column for f in model._meta.concrete_fields}]
    names = [f.attname for f in model._meta.concrete_fields] + extras
    return order + [at[column] for column in extras], names, converters


def one_row(model: type[M], sql: str, params: Sequence[Any], alias: str = "default") -> M | None:
    """The first row of ``sql`` as an instance of ``model`` (every field's column selected), or None.

    Columns that are not the model's (an annotation) are set as attributes of that name.
    """
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        if row is None:
            return None
        columns = tuple(d[0] for d in cursor.description)
    order, names, converters = _plan(model, alias, columns)
    values = [row[i] for i in order]
    for position, functions, expression in converters:  # as the ORM's compiler applies them
        for function in functions:
            values[position] = function(values[position], expression, connection)
    fields = len(model._meta.concrete_fields)
    instance = model.from_db(alias, names[:fields], values[:fields])
    for name, value in zip(names[fields:], values[fields:], strict=True):
        setattr(instance, name, value)
    return instance
