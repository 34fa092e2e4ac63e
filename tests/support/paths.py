"""Where things are: the checkout, the tests, the test servers (the same from every test folder)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SERVERS = TESTS / "servers"
