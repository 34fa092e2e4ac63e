"""An MCP server that gives its secret back in every common encoding, for the share redaction tests.

Usage:
    API_KEY=… python tests/servers/echo_secret.py stdio
    API_KEY=… python tests/servers/echo_secret.py http --port N

Tool ``leak``: its result holds ``API_KEY`` in each encoding of ``encodings`` (one a line); it logs each
(``notifications/message``), writes each to stderr (a line each), and writes the secret split across two
stderr lines and across two log notifications. Over HTTP every response also carries each encoding that
is ASCII in a header (``X-Echo-<name>``). Bound to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import warnings
from typing import Any
from urllib.parse import quote, quote_plus

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SPLIT = 9  # where the secret is cut when it is written in two pieces


def encodings(secret: str) -> dict[str, str]:
    """The secret as common encoders write it; names fit for a header."""
    data = secret.encode()
    url = quote(secret, safe="")
    return {
        "raw": secret,
        "json": json.dumps(secret)[1:-1],
        "url": url,
        "url-lower": re.sub(r"%[0-9A-F]{2}", lambda hexes: hexes.group(0).lower(), url),
        "url-plus": quote_plus(secret),
        "upper": secret.upper(),
        "lower": secret.lower(),
        "hex": data.hex(),
        "hex-upper": data.hex().upper(),
        "base64": base64.b64encode(data).decode(),
        "base64url": base64.urlsafe_b64encode(data).decode().rstrip("="),
        "base64-at-1": base64.b64encode(b"\x01" + data + b"!").decode(),
        "base64-at-2": base64.urlsafe_b64encode(b"\xfa\xfb" + data + b"?!").decode(),
    }


SECRET = os.environ.get("API_KEY", "")
server = MCPServer("echo-secret", version="1.0.0")


@server.tool(description="Give the secret back in every common encoding, everywhere a server can.")
async def leak(ctx: Context) -> str:
    found = encodings(SECRET)
    for name, value in found.items():
        await ctx.log("info", f"{name}: {value}", logger_name="echo-secret")  # type: ignore[arg-type]
        print(f"stderr {name}: {value}", file=sys.stderr, flush=True)
    await ctx.log("info", f"split: {SECRET[:SPLIT]}", logger_name="echo-secret")  # type: ignore[arg-type]
    await ctx.log("info", f"{SECRET[SPLIT:]} (the rest)", logger_name="echo-secret")  # type: ignore[arg-type]
    print(f"split: {SECRET[:SPLIT]}\n{SECRET[SPLIT:]} (the rest)", file=sys.stderr, flush=True)
    return "\n".join(f"{name}: {value}" for name, value in found.items())


def _with_headers(app: Any) -> Any:
    """The ASGI app, each response carrying every encoding in a header."""
    found = encodings(SECRET).items()
    headers = [(f"x-echo-{name}".encode(), value.encode()) for name, value in found if value.isascii()]

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        await app(scope, receive, sending)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    sub.add_parser("http").add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
        return

    import uvicorn

    app = server.streamable_http_app(json_response=False, host="127.0.0.1")
    uvicorn.run(_with_headers(app), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
