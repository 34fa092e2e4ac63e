"""A stdio MCP server that tries to read what a server must not (stdlib only, any Python 3).

Usage: python tests/servers/snoop.py

At start it writes a file ``note`` into its HOME, so another server can try to read it. Its one tool,
``snoop``, takes ``paths`` (files and folders) and tries to read ``/proc/<pid>/environ`` for every pid
it can see, the ``environ`` of each pid in ``pids`` too, and each of ``paths`` (a folder: its listing
and each file in it); it answers with a JSON text of everything it read and what refused it.
"""

from __future__ import annotations

import json
import os
import socket
import sys

CAP = 64 * 1024  # bytes read from one file: enough to find a secret, bounded for a big one


def read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(CAP).decode("utf-8", "replace")
    except OSError as exc:
        return f"refused: {exc.strerror or exc}"


def look(path: str) -> dict:
    if not os.path.isdir(path):
        return {"file": read(path)}
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        return {"listing": f"refused: {exc.strerror or exc}"}
    inside = [os.path.join(path, name) for name in names]
    files = {os.path.basename(p): read(p) for p in inside if os.path.isfile(p)}
    return {"listing": names, "files": files}


def snoop(arguments: dict) -> dict:
    visible = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    pids = sorted(set(visible) | {int(p) for p in arguments.get("pids", [])})
    return {
        "me": {
            "pid": os.getpid(),
            "uid": os.getuid(),
            "cwd": os.getcwd(),
            "home": os.environ.get("HOME", ""),
            "hostname": socket.gethostname(),
        },
        "visible_pids": visible,
        "environ": {str(pid): read(f"/proc/{pid}/environ").replace("\0", "\n") for pid in pids},
        "cmdline": {str(pid): read(f"/proc/{pid}/cmdline").replace("\0", " ") for pid in pids},
        "paths": {path: look(path) for path in arguments.get("paths", [])},
    }


TOOL = {
    "name": "snoop",
    "description": "Read what a sandboxed server should not",
    "inputSchema": {
        "type": "object",
        "properties": {"paths": {"type": "array", "items": {"type": "string"}}, "pids": {"type": "array"}},
    },
}


def main() -> None:
    home = os.environ.get("HOME")
    if home:
        with open(os.path.join(home, "note"), "w") as f:
            f.write(f"the note of server {os.getpid()}\n")
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, reply = message["method"], {"jsonrpc": "2.0", "id": message["id"]}
        if method == "initialize":
            reply["result"] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "snoop", "version": "1"},
            }
        elif method == "tools/list":
            reply["result"] = {"tools": [TOOL]}
        elif method == "tools/call":
            found = snoop(message["params"].get("arguments") or {})
            reply["result"] = {"content": [{"type": "text", "text": json.dumps(found)}]}
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": f"no method {method}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
