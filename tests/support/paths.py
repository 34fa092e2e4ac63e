"""Where things are: the checkout, the tests, the test servers (the same from every test folder)."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SERVERS = TESTS / "servers"
# What the hosted sandbox must show the test servers (INSPECTOR_SANDBOX_READ): their folder, and
# node_modules, which may be a link into another checkout. The tests' own Python may live where the
# sandbox's user cannot reach (root's home): servers that need it run with the sandbox off.
SANDBOX_READ = list(dict.fromkeys([str(SERVERS), os.path.realpath(SERVERS / "node_modules")]))
