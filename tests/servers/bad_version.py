"""A stdio server that gets version negotiation wrong on purpose.

Modes: `weird` answers initialize with a version no client speaks; `refuse` answers -32602
"Unsupported protocol version"; `older` always answers 2024-11-05 whatever the client asked.
Stateless (server/discover): `relist-once` answers the first server/discover -32022 although its
`data.supported` lists the very version asked for, then answers properly; `relist` always does
(initialize, the handshake fallback, is answered properly).
"""

import json
import sys

MODE = sys.argv[1]
STATELESS = "2026-07-28"
INFO = {"name": "bad-version", "version": "1"}
refused = 0


def reply(message: dict, **answer: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **answer}) + "\n")
    sys.stdout.flush()


def discover(message: dict) -> None:
    global refused
    meta = (message.get("params") or {}).get("_meta") or {}
    asked = meta.get("io.modelcontextprotocol/protocolVersion")
    if MODE == "relist" or (MODE == "relist-once" and refused == 0):
        refused += 1
        data = {"supported": [STATELESS], "requested": asked}
        reply(message, error={"code": -32022, "message": "Unsupported protocol version", "data": data})
        return
    result = {
        "resultType": "complete",
        "supportedVersions": [STATELESS],
        "capabilities": {},
        "_meta": {"io.modelcontextprotocol/serverInfo": INFO},
    }
    reply(message, result=result)


for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "server/discover":
        discover(message)
    elif method != "initialize":
        if "id" in message and method is not None:
            reply(message, result={})
    elif MODE == "refuse":
        error = {
            "code": -32602,
            "message": "Unsupported protocol version",
            "data": {"supported": ["1999-01-01"], "requested": message["params"]["protocolVersion"]},
        }
        reply(message, error=error)
    else:
        asked = message["params"]["protocolVersion"]
        version = {"weird": "1999-01-01", "older": "2024-11-05"}.get(MODE, asked)
        reply(message, result={"protocolVersion": version, "capabilities": {}, "serverInfo": INFO})
