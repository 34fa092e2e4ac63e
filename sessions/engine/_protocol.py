"""Names the MCP specification gives, which the session's parts share: method groups and metadata keys."""

from __future__ import annotations

import json
from typing import Any

# Server→client requests that wait for a person; request clocks pause while one is open.
HUMAN_METHODS = frozenset({"sampling/createMessage", "elicitation/create"})
# Methods whose requests carry a progress token unless the caller says otherwise.
PROGRESS_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
# What a server may send before the client's `initialized` notification.
EARLY_SERVER_METHODS = frozenset({"ping", "notifications/message", "notifications/progress"})
# The client capability a server→client request needs.
CAPABILITY_OF = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
# Requests the spec forbids cancelling.
UNCANCELLABLE = frozenset({"initialize", "server/discover"})

# The stateless revision (2026-07-28): protocol metadata every request carries in params._meta.
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
# Requests a stateless server may answer with an input_required result (mcp-types INPUT_REQUIRED_METHODS).
INPUT_REQUIRED_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
# Error codes the stateless revision answers with HTTP 400.
STATELESS_400_CODES = frozenset({-32020, -32021, -32022})

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode(message: Any) -> bytes:
    """Return a message as the compact UTF-8 JSON the engine puts on the wire."""
    return _encode(message).encode()
