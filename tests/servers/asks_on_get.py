"""A Streamable-HTTP MCP server that asks its questions on the standalone GET stream (starlette + uvicorn).

Usage: python tests/servers/asks_on_get.py PORT        -> http://127.0.0.1:PORT/mcp

``initialize`` issues a session id and declares ``tools``. As soon as the client opens the GET stream,
the server sends on it an ``elicitation/create`` (id ``ask-elicit``: a form with a defaulted ``name``
and a required ``age``) and a ``sampling/createMessage`` (id ``ask-sample``), unrelated to any
request, and keeps the stream open. The tool ``answers`` waits (up to 10 s) until the client has
POSTed a response to both and returns them as JSON text: ``{"ask-elicit": ..., "ask-sample": ...}``,
each the response's ``result`` or ``error``. State is per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SESSION = "asks-on-get-1"
TOOL = {
    "name": "answers",
    "description": "the client's answers to the GET stream's questions",
    "inputSchema": {"type": "object"},
}
QUESTIONS: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": "ask-elicit",
        "method": "elicitation/create",
        "params": {
            "message": "Who is there?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "Ada"},
                    "age": {"type": "integer", "minimum": 18},
                },
                "required": ["name", "age"],
            },
        },
    },
    {
        "jsonrpc": "2.0",
        "id": "ask-sample",
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi?"}}],
            "maxTokens": 5,
        },
    },
]
answers: dict[str, Any] = {}
all_answered = asyncio.Event()


def result(msg_id: Any, res: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": msg_id, "result": res}, headers={"mcp-session-id": SESSION})


async def handle_get(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        for question in QUESTIONS:
            yield f"event: message\ndata: {json.dumps(question)}\n\n".encode()
        await asyncio.Event().wait()  # held open until the client goes away

    return StreamingResponse(body(), media_type="text/event-stream", headers={"mcp-session-id": SESSION})


async def handle_post(request: Request) -> Response:
    msg = json.loads(await request.body())
    method, msg_id = msg.get("method"), msg.get("id")
    if method is None:  # a response to one of our questions
        answers[str(msg_id)] = msg.get("result", msg.get("error"))
        if len(answers) >= len(QUESTIONS):
            all_answered.set()
        return Response(status_code=202)
    if msg_id is None:
        return Response(status_code=202)
    if method == "initialize":
        version = (msg.get("params") or {}).get("protocolVersion", "2025-11-25")
        info = {"name": "asks-on-get", "version": "0.0.1"}
        return result(msg_id, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
    if method == "tools/list":
        return result(msg_id, {"tools": [TOOL]})
    if method == "tools/call":
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_answered.wait(), 10)
        return result(msg_id, {"content": [{"type": "text", "text": json.dumps(answers, sort_keys=True)}]})
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return JSONResponse({"jsonrpc": "2.0", "id": msg_id, "error": error}, headers={"mcp-session-id": SESSION})


async def endpoint(request: Request) -> Response:
    if request.method == "GET":
        return await handle_get(request)
    if request.method == "DELETE":
        return Response(status_code=200)
    return await handle_post(request)


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.stderr.write("usage: asks_on_get.py PORT\n")
        return 2
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
