"""A stdio server that gets version negotiation wrong on purpose.

Modes: `weird` answers initialize with a version no client speaks; `refuse` answers -32602
"Unsupported protocol version"; `older` always answers 2024-11-05 whatever the client asked.
"""

import json
import sys

MODE = sys.argv[1]

for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") != "initialize":
        if "id" in message and "method" in message:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
        continue
    if MODE == "refuse":
        error = {
            "code": -32602,
            "message": "Unsupported protocol version",
            "data": {"supported": ["1999-01-01"], "requested": message["params"]["protocolVersion"]},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
    else:
        version = "1999-01-01" if MODE == "weird" else "2024-11-05"
        result = {
            "protocolVersion": version,
            "capabilities": {},
            "serverInfo": {"name": "bad-version", "version": "1"},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
