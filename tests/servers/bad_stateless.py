"""A stateless (2026-07-28) stdio server that gets subscriptions/listen wrong, for the verdict tests.

Usage: python tests/servers/bad_stateless.py MODE

- ``violations``: acknowledges a listen stream with more than was asked for, then sends on it a
  resource update nobody subscribed to, a list change with no subscription id, one naming a
  subscription that does not exist, a second acknowledgement, and ends the stream with a result.
- every mode lists tools whose ``x-mcp-header`` annotations break the rules (and one that keeps them).
- ``refuse``: answers subscriptions/listen with -32601 (method not found).
- ``silent``: never acknowledges subscriptions/listen.
- ``discover-silent``: never answers server/discover, but speaks the handshake (initialize), so
  ``auto`` mode has to give up on discovery by its timeout and fall back.
"""

from __future__ import annotations

import json
import sys

MODES = {"violations", "refuse", "silent", "discover-silent"}
VERSION = "2026-07-28"
SID = "io.modelcontextprotocol/subscriptionId"
INFO = {"io.modelcontextprotocol/serverInfo": {"name": "bad-stateless", "version": "0"}}
CAPABILITIES = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True}}

# Tools whose x-mcp-header annotations break the rules (number type, off the properties path, a
# repeated token), beside one that keeps them.
TOOLS = [
    {"name": "t", "inputSchema": {"type": "object"}},
    {
        "name": "on-a-number",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
    },
    {
        "name": "in-an-array",
        "inputSchema": {
            "type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}},
        },
    },
    {
        "name": "twice",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "region"},
            },
        },
    },
    {
        "name": "fine",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Region"}}},
    },
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def note(method: str, params: dict) -> None:
    send({"jsonrpc": "2.0", "method": method, "params": params})


def handle(mode: str, message: dict) -> None:
    method, msg_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if msg_id is None:
        return
    if method == "server/discover":
        if mode == "discover-silent":
            return
        result = {"supportedVersions": [VERSION], "capabilities": CAPABILITIES, "resultType": "complete"}
        send({"jsonrpc": "2.0", "id": msg_id, "result": {**result, "_meta": INFO}})
    elif method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": "bad-stateless", "version": "0"},
        }
        send({"jsonrpc": "2.0", "id": msg_id, "result": result})
    elif method == "subscriptions/listen":
        if mode == "refuse":
            error = {"code": -32601, "message": "Method not found"}
            send({"jsonrpc": "2.0", "id": msg_id, "error": error})
        elif mode == "violations":
            asked = params.get("notifications") or {}
            honored = {**asked, "promptsListChanged": True}
            honored["resourceSubscriptions"] = [
                *(asked.get("resourceSubscriptions") or []),
                "extra://sneaked",
            ]
            note(
                "notifications/subscriptions/acknowledged", {"_meta": {SID: msg_id}, "notifications": honored}
            )
            note("notifications/resources/updated", {"_meta": {SID: msg_id}, "uri": "never://asked"})
            note("notifications/tools/list_changed", {})
            note("notifications/tools/list_changed", {"_meta": {SID: 999}})
            note("notifications/subscriptions/acknowledged", {"_meta": {SID: msg_id}, "notifications": {}})
            send(
                {"jsonrpc": "2.0", "id": msg_id, "result": {"resultType": "complete", "_meta": {SID: msg_id}}}
            )
    elif method == "tools/list":
        send(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "result": {"tools": TOOLS, "resultType": "complete", "_meta": INFO},
            }
        )
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": msg_id, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "result": {"resultType": "complete", "_meta": INFO}})


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.stderr.write(f"usage: bad_stateless.py {{{'|'.join(sorted(MODES))}}}\n")
        return 2
    for line in sys.stdin:
        if line.strip():
            handle(sys.argv[1], json.loads(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
