"""The conformance suite's ``--command``: play one client scenario with the CLI (support/conformance.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.conformance import play  # noqa: E402  (tests/ is on sys.path only from here)

if __name__ == "__main__":
    sys.exit(play(sys.argv))
