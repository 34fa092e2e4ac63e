"""A Streamable-HTTP MCP "server" that misbehaves in one precise way per mode (starlette + uvicorn).

Usage: python tests/servers/bad_http.py MODE PORT        -> http://127.0.0.1:PORT/mcp

Common behaviour: POST bodies are single JSON-RPC messages. ``initialize`` is answered with the client's
protocolVersion, ``capabilities: {"tools": {}}``; ``tools/list`` lists one tool ``t``; ``tools/call`` answers
``{"content": [{"type": "text", "text": "ok <arguments as JSON>"}]}``; ``ping`` answers ``{}``; other
methods get -32601. Notifications and responses get 202 with no body. Replies are application/json except
where a mode says otherwise. State is per process. Modes:

expire      initialize issues ``mcp-session-id: expire-<n>``. A POST without a session id that is not
            initialize gets 400; an unknown id gets 404. The 2nd POST following initialize is still
            served, after which the session is forgotten: every later request with that id gets 404.
            GET -> 405; DELETE of a live session -> 200 (forgets it).
expire400   the same, but unknown/expired session ids get 400 (like server-everything).
cut         initialize issues ``mcp-session-id: cut-<n>``. The k-th ``tools/call`` is answered as SSE:
            one event ``id: s<k>-1`` + ``retry: 100`` carrying notifications/progress (progress 1, total 2)
            for the request's progressToken (a notifications/message if it had none), then the server
            ends the stream without the response. GET with the session id and ``Last-Event-ID: s<k>-1``
            replays the rest as SSE: ``id: s<k>-2`` progress 2/2, ``id: s<k>-3`` the response (text
            "resumed"), then ends the stream. GET without Last-Event-ID -> 405; unknown event id -> 400.
cut-abort   like cut, but the connection is aborted after the first event (incomplete chunked body)
            instead of the stream being ended cleanly.
plain       no session id; every request answered with application/json; notifications -> 202;
            GET -> 405; DELETE -> 405.
hold        like plain, but initialize is answered as SSE: the response 0.15 s after the POST, then the
            stream is held open (45 s, or until the client goes away). ``GET /held`` answers
            ``{"held": n}``, the streams still held, once n is 0 or after 10 s.
big-json    like plain, but tools/call {"size": N} (default 20 MiB) is answered with a JSON body whose text
            content is N bytes of "x".
big-sse     like plain, but tools/call {"size": N, "line": L} (default 20 MiB, L = N) is answered as SSE:
            an event of N bytes of "x" in ``data:`` lines of L bytes, then the response in its own
            event (text "after big").
late-get    like plain, but GET opens the standalone SSE stream 0.5 s late, and holds it (45 s, or until
            the client goes away); ``tools/list`` lists one tool, named ``after-get`` if the stream
            was open by then, else ``before-get`` (a server that drops what it sends before then).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODES = {"expire", "expire400", "cut", "cut-abort", "plain", "hold", "big-json", "big-sse", "late-get"}
STATELESS = {"plain", "hold", "big-json", "big-sse", "late-get"}  # modes without sessions
TOOL = {"name": "t", "description": "test tool", "inputSchema": {"type": "object"}}

MODE = ""
sessions: dict[str, int] = {}  # session id -> POSTs seen since initialize
replays: dict[str, list[tuple[str, dict]]] = {}  # Last-Event-ID -> remaining (event id, message)
counters = {"session": 0, "stream": 0, "held": 0, "listening": 0}
MIB = 1024 * 1024


class Abort(Exception):
    """Raised inside a streaming body to drop the connection mid-response."""


def error(msg_id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def answer(msg: dict) -> dict:
    method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        res: dict = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": f"bad-http-{MODE}", "version": "0.0.1"},
        }
    elif method == "tools/list" and MODE == "late-get":
        res = {"tools": [{**TOOL, "name": "after-get" if counters["listening"] else "before-get"}]}
    elif method == "tools/list":
        res = {"tools": [TOOL]}
    elif method == "tools/call":
        res = {"content": [{"type": "text", "text": "ok " + json.dumps(params.get("arguments") or {})}]}
    elif method == "ping":
        res = {}
    else:
        return error(msg_id, -32601, f"Method not found: {method}")
    return {"jsonrpc": "2.0", "id": msg_id, "result": res}


def sse(event_id: str, msg: dict, retry: int | None = None) -> bytes:
    head = f"id: {event_id}\n" + (f"retry: {retry}\n" if retry is not None else "")
    return (head + "event: message\ndata: " + json.dumps(msg) + "\n\n").encode()


def cut_stream(msg: dict) -> Response:
    counters["stream"] += 1
    prefix = f"s{counters['stream']}"
    token = ((msg.get("params") or {}).get("_meta") or {}).get("progressToken")

    def progress(n: int) -> dict:
        if token is None:
            return {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": f"progress {n}/2"},
            }
        return {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": n, "total": 2},
        }

    resumed = {"content": [{"type": "text", "text": "resumed"}]}
    final = {"jsonrpc": "2.0", "id": msg.get("id"), "result": resumed}
    replays[f"{prefix}-1"] = [(f"{prefix}-2", progress(2)), (f"{prefix}-3", final)]

    async def body() -> AsyncIterator[bytes]:
        yield sse(f"{prefix}-1", progress(1), retry=100)
        if MODE == "cut-abort":
            raise Abort

    return StreamingResponse(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


def held_stream(msg: dict) -> Response:
    """Answer after 0.15 s, then keep the stream open as a server may (the spec only says SHOULD close)."""

    async def body() -> AsyncIterator[bytes]:
        counters["held"] += 1
        try:
            await asyncio.sleep(0.15)
            yield sse("held-1", answer(msg))
            await asyncio.sleep(45)
        finally:
            counters["held"] -= 1

    return StreamingResponse(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


async def held(request: Request) -> Response:
    deadline = time.monotonic() + 10
    while counters["held"] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return JSONResponse({"held": counters["held"]})


def big_reply(msg: dict) -> Response:
    args = (msg.get("params") or {}).get("arguments") or {}
    size = int(args.get("size", 20 * MIB))
    if MODE == "big-json":
        head = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": {"content": [{"type": "text"}]}})
        before, after = head[: -len("}]}}")] + ', "text": "', '"}]}}'

        async def body() -> AsyncIterator[bytes]:
            yield before.encode()
            for start in range(0, size, MIB):
                yield b"x" * min(MIB, size - start)
            yield after.encode()

        return StreamingResponse(body(), media_type="application/json")
    line = int(args.get("line", size)) or size
    final = {
        "jsonrpc": "2.0",
        "id": msg.get("id"),
        "result": {"content": [{"type": "text", "text": "after big"}]},
    }

    async def events() -> AsyncIterator[bytes]:
        for start in range(0, size, line):
            yield b"data: "
            for at in range(start, min(start + line, size), MIB):
                yield b"x" * min(MIB, size - at, start + line - at)
            yield b"\n"
        yield b"\n" + sse("big-2", final)

    return StreamingResponse(events(), media_type="text/event-stream")


async def handle_get(request: Request) -> Response:
    if MODE == "late-get":
        await asyncio.sleep(0.5)

        async def listening() -> AsyncIterator[bytes]:
            counters["listening"] += 1  # the head has gone out: the stream is open
            try:
                yield b": open\n\n"
                await asyncio.sleep(45)
            finally:
                counters["listening"] -= 1

        return StreamingResponse(listening(), media_type="text/event-stream")
    last = request.headers.get("last-event-id")
    if MODE not in ("cut", "cut-abort") or last is None:
        return Response(status_code=405, headers={"allow": "POST" if MODE in STATELESS else "POST, DELETE"})
    if request.headers.get("mcp-session-id") not in sessions:
        return Response(status_code=404)
    events = replays.get(last)
    if events is None:
        return JSONResponse(error(None, -32000, f"unknown Last-Event-ID {last}"), status_code=400)

    async def body() -> AsyncIterator[bytes]:
        for event_id, msg in events:
            yield sse(event_id, msg)

    return StreamingResponse(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


async def handle_delete(request: Request) -> Response:
    if MODE in STATELESS:
        return Response(status_code=405, headers={"allow": "POST"})
    sid = request.headers.get("mcp-session-id")
    if sid not in sessions:
        return Response(status_code=400 if MODE == "expire400" else 404)
    del sessions[sid]
    return Response(status_code=200)


async def handle_post(request: Request) -> Response:
    try:
        msg = json.loads(await request.body())
    except ValueError:
        return JSONResponse(error(None, -32700, "Parse error"), status_code=400)
    if not isinstance(msg, dict):
        return JSONResponse(error(None, -32600, "Invalid Request: single messages only"), status_code=400)
    is_request = "method" in msg and "id" in msg
    headers: dict[str, str] = {}

    if MODE not in STATELESS:
        sid = request.headers.get("mcp-session-id")
        if msg.get("method") == "initialize":
            counters["session"] += 1
            sid = f"{MODE}-{counters['session']}"
            sessions[sid] = 0
        elif sid is None:
            return JSONResponse(error(msg.get("id"), -32000, "Bad Request: no session id"), status_code=400)
        elif sid not in sessions:
            status = 400 if MODE == "expire400" else 404
            return JSONResponse(error(msg.get("id"), -32001, "Session not found"), status_code=status)
        else:
            sessions[sid] += 1
            if MODE in ("expire", "expire400") and sessions[sid] >= 2:
                del sessions[sid]  # this POST is still served; the next one finds no session
        headers["mcp-session-id"] = sid

    if not is_request:
        return Response(status_code=202, headers=headers)
    if MODE in ("cut", "cut-abort") and msg.get("method") == "tools/call":
        response = cut_stream(msg)
        response.headers.update(headers)
        return response
    if MODE == "hold" and msg.get("method") == "initialize":
        return held_stream(msg)
    if MODE in ("big-json", "big-sse") and msg.get("method") == "tools/call":
        return big_reply(msg)
    return JSONResponse(answer(msg), headers=headers)


async def endpoint(request: Request) -> Response:
    if request.method == "GET":
        return await handle_get(request)
    if request.method == "DELETE":
        return await handle_delete(request)
    return await handle_post(request)


class SwallowAbort:
    """Turn `Abort` into a dropped connection: uvicorn closes it when the app returns mid-response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with contextlib.suppress(Abort):
            await self.app(scope, receive, send)


def main() -> int:
    global MODE
    if len(sys.argv) != 3 or sys.argv[1] not in MODES or not sys.argv[2].isdigit():
        sys.stderr.write(f"usage: bad_http.py {{{'|'.join(sorted(MODES))}}} PORT\n")
        return 2
    MODE = sys.argv[1]
    routes = [Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]), Route("/held", held)]
    app = Starlette(routes=routes)
    # cut-abort: silence uvicorn's "ASGI callable returned without completing response" error line.
    log_level = "critical" if MODE == "cut-abort" else "warning"
    port = int(sys.argv[2])
    uvicorn.run(SwallowAbort(app), host="127.0.0.1", port=port, log_level=log_level, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
