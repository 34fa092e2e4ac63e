"""A tiny stateful Streamable HTTP MCP server for many sessions at once: answers in JSON, no SDK.

.venv/bin/python -m bench.tiny_http PORT. It answers ``initialize`` (with an ``Mcp-Session-Id``),
``ping`` and ``tools/list`` (none), takes notifications (202), refuses the GET stream (405) and
ends a session on DELETE; so the cost of thousands of sessions is the client's, not the server's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys

_ids = itertools.count(1)


def _answer(message: dict[str, object]) -> tuple[int, bytes, str]:
    method = message.get("method")
    if "id" not in message:
        return 202, b"", ""
    if method == "initialize":
        params = message.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        result: dict[str, object] = {
            "protocolVersion": version or "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tiny", "version": "1.0"},
        }
        session = f"s{next(_ids)}"
    else:
        result, session = ({"tools": []} if method == "tools/list" else {}), ""
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    return 200, body, session


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            verb = lines[0].split(" ", 1)[0]
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            extra = ""
            if verb == "POST":
                status, out, session = _answer(json.loads(body))
                extra = "Content-Type: application/json\r\n" if out else ""
                extra += f"Mcp-Session-Id: {session}\r\n" if session else ""
            else:
                status, out = (200, b"") if verb == "DELETE" else (405, b"")
            reason = {200: "OK", 202: "Accepted", 405: "Method Not Allowed"}[status]
            writer.write(
                f"HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: {len(out)}\r\n\r\n".encode() + out
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
