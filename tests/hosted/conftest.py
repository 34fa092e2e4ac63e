"""Fixtures of the hosted tests: PostgreSQL and Redis there (``services``), a database of a test's own
(migrated, or empty)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.hosted import POSTGRES, REDIS, new_database, reachable


@pytest.fixture
def services() -> None:
    """PostgreSQL and Redis run on every machine and in CI: missing, they fail the test, never skip it."""
    missing = [
        name for name, address in (("PostgreSQL", POSTGRES), ("Redis", REDIS)) if not reachable(address)
    ]
    assert not missing, (
        f"{' and '.join(missing)} not reachable on 127.0.0.1: the hosted set-up cannot be tested"
    )


@pytest.fixture
def hosted_database() -> Iterator[str]:
    """A database of the test's own, migrated."""
    with new_database() as name:
        yield name


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database of the test's own with no table, for a test that runs ``manage.py migrate`` as a
    deployment does."""
    with new_database(migrated=False) as name:
        yield name
