"""A stdio server whose messages parse as JSON-RPC but break MCP's rules and schema.

On tools/list: a result whose tool has no inputSchema and a numeric name (schema errors).
On tools/call: progress that goes backwards, then a sampling request although the client
may not have declared sampling, then the result.
"""

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        info = {"name": "bad-shapes", "version": "1"}
        result = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": info,
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [{"name": 42}]}})
    elif method == "tools/call":
        token = params.get("_meta", {}).get("progressToken")
        for progress in (2, 1):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": progress},
                }
            )
        sampling = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
        send({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": sampling})
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "done"}]}})
    elif request_id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
