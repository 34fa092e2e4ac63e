"""A stdio MCP "server" that leaves processes behind and will not stop by itself (stdlib only).

Usage: python tests/servers/daemonizing.py PIDFILE

At start it forks a child that calls ``setsid()`` (keeping the server's stdout open, as a careless
child does) and a daemon by double fork (fork, ``setsid()``, fork, the middle one exits, stdio on
/dev/null). Both sleep for ever. Then it writes ``{"server": pid, "setsid": pid, "daemon": pid}`` to
PIDFILE (atomically). All three ignore SIGTERM and SIGHUP, and the server ignores the end of its
stdin: only SIGKILL ends them. It answers ``initialize`` (echoing the version), ``tools/list``
(no tools) and ``ping``; other requests get -32601.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def stubborn() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def sleep_for_ever() -> None:
    while True:
        time.sleep(3600)


def setsid_child() -> int:
    pid = os.fork()
    if pid == 0:
        os.setsid()
        sleep_for_ever()
    return pid


def double_forked_daemon() -> int:
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        os.setsid()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(write)
            sleep_for_ever()
        os.write(write, str(pid).encode())
        os._exit(0)
    os.close(write)
    daemon = int(os.read(read, 32))
    os.close(read)
    return daemon


def serve() -> None:
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, reply = message["method"], {"jsonrpc": "2.0", "id": message["id"]}
        if method == "initialize":
            reply["result"] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "daemonizing", "version": "1"},
            }
        elif method == "tools/list":
            reply["result"] = {"tools": []}
        elif method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601, "message": f"no method {method}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def main() -> None:
    stubborn()
    pids = {"server": os.getpid(), "setsid": setsid_child(), "daemon": double_forked_daemon()}
    path = sys.argv[1]
    with open(path + ".tmp", "w") as f:
        json.dump(pids, f)
    os.replace(path + ".tmp", path)
    serve()
    sleep_for_ever()  # the end of stdin changes nothing


if __name__ == "__main__":
    main()
