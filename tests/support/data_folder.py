"""A pytest plugin (``-p`` in the project's addopts) that gives a test run its own data folder.

pytest loads it before pytest-django reads the settings, which make the folder and read (or create) its
secret key and encryption keys: set any later, a lone pytest process would use the user's own folder, and a
live runtime's tap ingester would take in, and remove, the user's spools. xdist's workers inherit it.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("INSPECTOR_DATA_DIR", tempfile.mkdtemp(prefix="mcp-inspector-tests-"))
