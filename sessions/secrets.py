"""Secrets at rest: model fields stored encrypted with Fernet, under the keys of INSPECTOR_SECRET_KEYS.

A Fernet token is AES-128-CBC with an HMAC-SHA256 over it: a value altered in the database, or
encrypted with a key that is not listed, is refused with ``SecretUnreadable``, never read as garbage.
``MultiFernet`` decrypts with any listed key and encrypts with the first, so a new key goes first,
``manage.py rotate_secrets`` re-encrypts every stored value with it, and the old key can then go.

Encrypted values cannot be searched or compared in SQL (each encryption of a value differs): these
fields take no lookup but ``isnull``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django import forms
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, models, transaction
from django.db.models import Lookup

__all__ = [
    "EncryptedJSONField",
    "check_secret_keys",
    "EncryptedTextField",
    "SecretUnreadable",
    "decrypt",
    "encrypt",
    "encrypted_fields",
    "rotate_all",
]

# The one hint that a person with no key needs: how to make one.
MAKE_A_KEY = (
    "make one with `python -c "
    "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
)


@checks.register(checks.Tags.security)
def check_secret_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """In the hosted set-up, tell whether INSPECTOR_SECRET_KEYS is set (locally one is generated).

    Every process that starts Django runs it: `mcp-inspector` refuses to start, `manage.py` commands
    (migrate, run_engine_worker) stop, before anything is stored without a key.
    """
    if not settings.INSPECTOR_HOSTED or settings.INSPECTOR_SECRET_KEYS:
        return []
    return [
        checks.Error(
            "INSPECTOR_SECRET_KEYS is not set: saved servers' tokens, environments and headers are "
            "stored encrypted with it",
            hint=f"{MAKE_A_KEY}; set INSPECTOR_SECRET_KEYS (or INSPECTOR_SECRET_KEYS_FILE) to it, "
            "the same on every web process and engine worker",
            id="inspector.E004",
        )
    ]


class SecretUnreadable(Exception):
    """A stored secret that none of the keys decrypts: another key encrypted it, or it was altered."""


@functools.lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _keys() -> MultiFernet:
    keys = tuple(settings.INSPECTOR_SECRET_KEYS)
    if not keys:
        raise ImproperlyConfigured(
            "INSPECTOR_SECRET_KEYS is not set: secrets are stored encrypted with it; "
            f"{MAKE_A_KEY} and set the same one on every web process and engine worker"
        )
    return _fernet(keys)


def encrypt(text: str) -> str:
    """Return text encrypted with the newest key, as a Fernet token (ASCII)."""
    return _keys().encrypt(text.encode()).decode("ascii")


def decrypt(token: str, what: str = "a stored secret") -> str:
    """Return the text a token holds; SecretUnreadable if no key decrypts it."""
    try:
        return _keys().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            f"{what} cannot be decrypted with INSPECTOR_SECRET_KEYS: it was encrypted with a key "
            "that is not listed (list the old key after the new one), or it was altered"
        ) from None


class _Encrypted(models.TextField):
    """A text column holding a Fernet token; the model sees the value the token holds."""

    def _what(self) -> str:
        model = getattr(self, "model", None)
        return f"{model._meta.label}.{self.name}" if model is not None else "a stored secret"

    def encode(self, value: Any) -> str:
        raise NotImplementedError

    def decode(self, text: str) -> Any:
        raise NotImplementedError

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        return self.decode(decrypt(value, self._what()))

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        return encrypt(self.encode(value))

    def get_lookup(self, lookup_name: str) -> type[Lookup] | None:
        # Any other lookup would compare a fresh, different token with the stored one: never true.
        return super().get_lookup(lookup_name) if lookup_name == "isnull" else None


class EncryptedTextField(_Encrypted):
    """Text stored encrypted."""

    def encode(self, value: Any) -> str:
        return str(value)

    def decode(self, text: str) -> str:
        return text


class EncryptedJSONField(_Encrypted):
    """A JSON value (a dict, a list...) stored encrypted."""

    # What django-stubs' plugin types the attribute as (its JSONField says the same).
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def to_python(self, value: Any) -> Any:
        return value

    def encode(self, value: Any) -> str:
        return json.dumps(value)

    def decode(self, text: str) -> Any:
        return json.loads(text)

    def value_to_string(self, obj: models.Model) -> Any:
        return self.value_from_object(obj)

    def formfield(self, form_class: Any = None, choices_form_class: Any = None, **kwargs: Any) -> Any:
        options = {"form_class": form_class or forms.JSONField, "choices_form_class": choices_form_class}
        return super().formfield(**options, **kwargs)


def encrypted_fields() -> Iterator[tuple[type[models.Model], _Encrypted]]:
    """Every model field that stores a secret encrypted."""
    from django.apps import apps

    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, _Encrypted):
                yield model, field


def rotate_all(batch: int = 500) -> int:
    """Re-encrypt every stored secret with the newest key; return how many values were rewritten.

    Works on the stored tokens (MultiFernet.rotate), not through the models, so nothing but the
    encryption changes. A row the application rewrote meanwhile is left alone: it was written with
    the newest key already (given every process runs with the new keys).
    """
    keys = _keys()
    rotated = 0
    for model, field in encrypted_fields():
        table, column, pk = (
            connection.ops.quote_name(name)
            for name in (model._meta.db_table, field.column, model._meta.pk.column)
        )
        last: Any = None
        while True:
            with connection.cursor() as cursor:
                after = "" if last is None else f"WHERE {pk} > %s "
                cursor.execute(
                    f"SELECT {pk}, {column} FROM {table} {after}ORDER BY {pk} LIMIT %s",
                    ([] if last is None else [last]) + [batch],
                )
                rows = cursor.fetchall()
            if not rows:
                break
            with transaction.atomic():
                for row_pk, token in rows:
                    if token is None:
                        continue
                    try:
                        fresh = keys.rotate(token.encode()).decode("ascii")
                    except InvalidToken:
                        raise SecretUnreadable(
                            f"{model._meta.label}.{field.name} of row {row_pk} cannot be decrypted with "
                            "INSPECTOR_SECRET_KEYS: list every key still in use, newest first"
                        ) from None
                    with connection.cursor() as cursor:
                        cursor.execute(
                            f"UPDATE {table} SET {column} = %s WHERE {pk} = %s AND {column} = %s",
                            [fresh, row_pk, token],
                        )
                        rotated += cursor.rowcount
            last = rows[-1][0]
    return rotated
