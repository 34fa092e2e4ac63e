"""A stdio MCP "server" that misbehaves in one precise way per mode (stdlib only).

Usage: python tests/servers/bad_stdio.py MODE

Every mode but stderr-flood-init answers ``initialize`` correctly (echoing the client's
protocolVersion, ``capabilities: {"tools": {}}``), ignores every notification, and answers
``tools/list`` with one tool ``t`` unless the mode says otherwise. Unknown request methods get
-32601. Modes:

garbage          tools/list: a non-JSON line, a line of invalid UTF-8, a JSON line that is not JSON-RPC,
                 then the real response.
die              tools/call: writes "dying" to stderr and exits with code 3 without answering.
hang             tools/call is never answered; exits (code 0) when stdin closes.
hang-ignore-eof  like hang, but ignores SIGTERM and stdin close (only SIGKILL ends it).
flood            tools/call {"count": N} (default 1000): N notifications/message (level info, data {"i": k})
                 then the result (text "flooded N").
big              tools/call {"size": N} (default 50 MB): result whose single text content is N bytes of "x".
big-id-last      like big, but the response's members in the TypeScript SDK's order: result, jsonrpc, id.
violations       tools/list: the response twice (same id), a response to unknown id 999, a response carrying
                 both result and error, a notification carrying an id, a progress notification for an
                 unknown token -- in that order, each on its own line.
stderr           writes several lines to stderr during initialize (before answering it).
batch            tools/list: one JSON array holding the response and a notifications/message.
endless-line     tools/call {"size": N} (default 64 MiB): N bytes of "x" with no newline, then a newline, then
                 the result (text "after endless line").
deep             tools/call {"depth": N} (default 100000): a notifications/message whose data is N nested
                 arrays, then the result (text "after deep").
stderr-flood     tools/call is never answered: numbered lines ("stderr flood 0", "stderr flood 1", ...)
                 written to stderr without end, until the pipe closes or the process is killed.
stderr-flood-init  the same flood instead of an answer to initialize.
"""

from __future__ import annotations

import json
import signal
import sys
import time

MODES = {
    "garbage",
    "die",
    "hang",
    "hang-ignore-eof",
    "flood",
    "big",
    "big-id-last",
    "violations",
    "stderr",
    "batch",
    "withdraw",
    "endless-line",
    "deep",
    "stderr-flood",
    "stderr-flood-init",
}
TOOL = {"name": "t", "description": "test tool", "inputSchema": {"type": "object"}}
FLOOD_LINE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"i":%d}}}\n'
out = sys.stdout.buffer


def dumps(msg: object) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def write(data: bytes) -> None:
    out.write(data)
    out.flush()


def result(msg_id: object, res: object) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "result": res}


def flood_stderr() -> None:
    """Numbered lines on stderr without end (BrokenPipeError ends it when the client closes the pipe)."""
    err = sys.stderr.buffer
    k = 0
    while True:
        err.write(b"".join(b"stderr flood %d\n" % i for i in range(k, k + 100)))
        err.flush()
        k += 100


def handle(mode: str, msg: dict) -> None:
    method = msg.get("method")
    msg_id = msg.get("id")
    params = msg.get("params") or {}
    if method is None or msg_id is None:
        return  # responses and notifications (incl. notifications/initialized) are ignored

    if method == "initialize":
        if mode == "stderr-flood-init":
            flood_stderr()
        if mode == "stderr":
            for i in range(1, 4):
                sys.stderr.write(f"stderr line {i} from bad_stdio\n")
            sys.stderr.write("warning: this server talks a lot on stderr\n")
            sys.stderr.flush()
        write(
            dumps(
                result(
                    msg_id,
                    {
                        "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": f"bad-stdio-{mode}", "version": "0.0.1"},
                    },
                )
            )
        )
    elif method == "tools/list":
        response = result(msg_id, {"tools": [TOOL]})
        if mode == "garbage":
            write(b"this is not json\n" + b"\xff\xfe oops\n" + dumps({"hello": "world"}) + dumps(response))
        elif mode == "violations":
            both = {"jsonrpc": "2.0", "id": msg_id, "result": {}, "error": {"code": -1, "message": "both"}}
            note_with_id = {
                "jsonrpc": "2.0",
                "id": 12345,
                "method": "notifications/message",
                "params": {"level": "info", "data": "notification with an id"},
            }
            stray_progress = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "no-such-token", "progress": 1},
            }
            messages = [response, response, result(999, {}), both, note_with_id, stray_progress]
            write(b"".join(dumps(m) for m in messages))
        elif mode == "batch":
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "batched"},
            }
            write(dumps([response, note]))
        else:
            write(dumps(response))
    elif method == "tools/call":
        args = params.get("arguments") or {}
        if mode == "die":
            sys.stderr.write("dying\n")
            sys.stderr.flush()
            sys.exit(3)
        elif mode in ("hang", "hang-ignore-eof"):
            return
        elif mode == "stderr-flood":
            flood_stderr()
        elif mode == "flood":
            count = int(args.get("count", 1000))
            chunk: list[bytes] = []
            for k in range(count):
                chunk.append(FLOOD_LINE % k)
                if len(chunk) >= 10000:
                    out.write(b"".join(chunk))
                    chunk.clear()
            out.write(b"".join(chunk))
            write(dumps(result(msg_id, {"content": [{"type": "text", "text": f"flooded {count}"}]})))
        elif mode == "withdraw":
            # Ask the client for a sampling answer, then change its mind before anyone answers.
            ask = {
                "messages": [{"role": "user", "content": {"type": "text", "text": "never mind"}}],
                "maxTokens": 5,
            }
            write(dumps({"jsonrpc": "2.0", "id": "ask-1", "method": "sampling/createMessage", "params": ask}))
            time.sleep(0.3)  # a person has had the prompt in front of them for a moment
            cancel = {"requestId": "ask-1", "reason": "no longer needed"}
            write(dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}))
            write(dumps(result(msg_id, {"content": [{"type": "text", "text": "withdrawn"}]})))
        elif mode == "endless-line":
            size = int(args.get("size", 64 * 1024 * 1024))
            for start in range(0, size, 1 << 20):
                out.write(b"x" * min(1 << 20, size - start))
            text = {"type": "text", "text": "after endless line"}
            write(b"\n" + dumps(result(msg_id, {"content": [text]})))
        elif mode == "deep":
            depth = int(args.get("depth", 100_000))
            data = b"[" * depth + b"]" * depth
            note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%s}}\n'
            write(note % data + dumps(result(msg_id, {"content": [{"type": "text", "text": "after deep"}]})))
        elif mode in ("big", "big-id-last"):
            size = int(args.get("size", 50 * 1024 * 1024))
            answer = result(msg_id, {"content": [{"type": "text", "text": "x" * size}]})
            if mode == "big-id-last":
                answer = {"result": answer["result"], "jsonrpc": "2.0", "id": msg_id}
            write(dumps(answer))
        else:
            write(dumps(result(msg_id, {"content": [{"type": "text", "text": "ok"}]})))
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        write(dumps({"jsonrpc": "2.0", "id": msg_id, "error": error}))


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.stderr.write(f"usage: bad_stdio.py {{{'|'.join(sorted(MODES))}}}\n")
        return 2
    mode = sys.argv[1]
    if mode == "hang-ignore-eof":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            handle(mode, msg)
    if mode == "hang-ignore-eof":
        while True:  # stdin is closed; only SIGKILL ends us now
            time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
