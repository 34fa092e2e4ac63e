"""Fixtures of the hosted tests: PostgreSQL and Redis there (``services``), a database of a test's own."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from support.hosted import POSTGRES, REDIS, reachable


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
    name = f"mcp_hosted_{uuid.uuid4().hex[:8]}"
    psql = ["psql", "-h", POSTGRES[0], "-U", "postgres", "-q", "-c"]
    subprocess.run([*psql, f"CREATE DATABASE {name}"], check=True, timeout=30, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(
            [*psql, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], timeout=30, capture_output=True
        )
