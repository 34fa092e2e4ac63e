"""A stdio server whose messages parse as JSON-RPC but break MCP's rules and schema.

Modes (the first argument; `shapes` when none):

- `shapes`: on tools/list, a tool with no inputSchema and a numeric name (schema errors); on
  tools/call, progress that goes backwards, then a sampling request although the client may not
  have declared sampling, then the result.
- `elicit`: on tools/call, an elicitation in URL mode (whatever the client declared); the call's
  text is the client's answer to it, as JSON.
- `nested-elicit`: like `elicit`, but a form elicitation whose requestedSchema nests an object
  (the spec allows only flat primitive properties).
- `outputs`: declares only `tools` (no logging, no listChanged); lists `add` with an outputSchema
  and answers a call's `shape` argument with structuredContent that is `right`, `wrong` or
  `missing`, after a log message and a tools/list_changed its capabilities do not allow.
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "shapes"
OUTPUT_SCHEMA = {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer_of(request_id: str) -> dict:
    """Read the client's messages until its response to our request ``request_id``."""
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message
    raise SystemExit(0)


def call_shapes(request_id: object, params: dict) -> None:
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


NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "Ada"},
        "address": {"type": "object", "properties": {"city": {"type": "string", "default": "Paris"}}},
    },
}


def call_elicit(request_id: object) -> None:
    asked = {"mode": "url", "message": "Sign in", "url": "https://example.com/", "elicitationId": "e-1"}
    if MODE == "nested-elicit":
        asked = {"message": "Where do you live?", "requestedSchema": NESTED_SCHEMA}
    send({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": asked})
    reply = answer_of("e1")
    text = json.dumps(reply.get("error") or reply.get("result"))
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})


def call_outputs(request_id: object, params: dict) -> None:
    send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    shape = (params.get("arguments") or {}).get("shape")
    result: dict = {"content": [{"type": "text", "text": "5"}]}
    if shape == "right":
        result["structuredContent"] = {"result": 5}
    elif shape == "wrong":
        result["structuredContent"] = {"result": "five"}
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


TOOLS = {
    "shapes": [{"name": 42}],
    "elicit": [{"name": "ask", "inputSchema": {"type": "object"}}],
    "nested-elicit": [{"name": "ask", "inputSchema": {"type": "object"}}],
    "outputs": [{"name": "add", "inputSchema": {"type": "object"}, "outputSchema": OUTPUT_SCHEMA}],
}

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
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS[MODE]}})
    elif method == "tools/call" and MODE in ("elicit", "nested-elicit"):
        call_elicit(request_id)
    elif method == "tools/call" and MODE == "outputs":
        call_outputs(request_id, params)
    elif method == "tools/call":
        call_shapes(request_id, params)
    elif request_id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
