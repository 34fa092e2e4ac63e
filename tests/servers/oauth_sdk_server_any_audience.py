"""tests/servers/oauth_sdk_server.py with a resource server that takes a token of its authorization server
whatever resource it was issued for (``validate_token_resource=False``, as a server whose verifier does
not check the audience runs): what a server behind a tap with ``--rewrite-resource`` must be.

Usage: the same as oauth_sdk_server.py.
"""

from __future__ import annotations

from typing import Any

import oauth_sdk_server
from mcp.server.auth.settings import AuthSettings


def any_audience(**settings: Any) -> AuthSettings:
    return AuthSettings(**{**settings, "validate_token_resource": False})


if __name__ == "__main__":
    oauth_sdk_server.AuthSettings = any_audience  # type: ignore[assignment,misc]
    oauth_sdk_server.main()
