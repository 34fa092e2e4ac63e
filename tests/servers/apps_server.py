"""An MCP Apps server (the Python SDK, ``mcp`` 2.3 ``MCPServer``) whose view is plain HTML.

Usage:
    python tests/servers/apps_server.py stdio
    python tests/servers/apps_server.py http --port N

Tools:

- ``show_weather(city)``: has a view (``_meta.ui.resourceUri = ui://weather/view.html``); answers a
  text and ``structuredContent`` {city, celsius}.
- ``legacy_weather(city)``: the same view through the deprecated flat ``_meta["ui/resourceUri"]``.
- ``refresh_weather(city)``: ``visibility: ["app"]``, for the view only (its Refresh button).
- ``model_only_secret()``: ``visibility: ["model"]``: a host must refuse it to the view.
- ``plain()``: no view.
- ``weather_clip(city)``: the same view as ``ui://weather/clip.html``, whose ``_meta.ui`` asks for the
  camera and clipboard writes (``permissions``), which the host grants only if the person does.

The view (``ui://weather/view.html``, ``text/html;profile=mcp-app``) speaks the view side of the
ext-apps protocol in its own inline script: ``ui/initialize``, ``ui/notifications/initialized``, then
shows the tool input and result it is sent, reports its size, and has buttons that call
``refresh_weather``, try ``model_only_secret``, ask to open a link, and send ``ui/message`` and
``ui/update-model-context``, ask for fullscreen (which it lists in ``availableDisplayModes``) and for
picture-in-picture (which it does not), and one that floods the host (10,000 messages a second for
three seconds, its size growing without end). It answers ``ui/resource-teardown``. What it saw is
written into its own page (``#log``), where a browser test reads it.

Its ``_meta.ui.csp`` declares one resource domain and a planted source that would widen its policy
(``'unsafe-eval'``), which the host drops and flags.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

UI = "ui://weather/view.html"
CLIP_UI = "ui://weather/clip.html"
MIME = "text/html;profile=mcp-app"
# One domain a live view may load from, and a planted source that would widen its policy: dropped.
CSP: dict[str, Any] = {"connectDomains": [], "resourceDomains": ["https://cdn.example.com", "'unsafe-eval'"]}

server = MCPServer("apps-test-server", version="1.0.0", log_level="WARNING")

TEMPERATURES = {"Oslo": 4, "Lisbon": 19, "Cairo": 31}

# The view: plain HTML whose inline script is the view side of the protocol.
VIEW = (Path(__file__).parent / "apps_view.html").read_text(encoding="utf-8")


def _weather(city: str) -> dict[str, Any]:
    celsius = TEMPERATURES.get(city, 12)
    return {"city": city, "celsius": celsius}


@server.tool(description="Show the weather in a city, in a view.", meta={"ui": {"resourceUri": UI}})
def show_weather(city: str) -> dict[str, Any]:
    weather = _weather(city)
    return {"summary": f"{city}: {weather['celsius']} °C", **weather}


@server.tool(description="The weather view, linked the deprecated way.", meta={"ui/resourceUri": UI})
def legacy_weather(city: str) -> str:
    return f"{city}: {_weather(city)['celsius']} °C"


@server.tool(
    description="Refresh the weather (for the view only).",
    meta={"ui": {"visibility": ["app"]}},
)
def refresh_weather(city: str) -> str:
    return f"refreshed {city}: {_weather(city)['celsius'] + 1} °C"


@server.tool(description="Only a model may call this.", meta={"ui": {"visibility": ["model"]}})
def model_only_secret() -> str:
    return "the secret"


@server.tool(description="A tool without a view.")
def plain() -> str:
    return "plain"


@server.tool(description="The weather view, asking for permissions.", meta={"ui": {"resourceUri": CLIP_UI}})
def weather_clip(city: str) -> str:
    return f"{city}: {_weather(city)['celsius']} °C"


@server.resource(
    CLIP_UI,
    name="weather-clip-view",
    mime_type=MIME,
    meta={"ui": {"permissions": {"camera": {}, "clipboardWrite": {}}}},
)
def weather_clip_view() -> str:
    return VIEW


@server.resource(UI, name="weather-view", mime_type=MIME, meta={"ui": {"csp": CSP, "prefersBorder": True}})
def weather_view() -> str:
    return VIEW


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    http = sub.add_parser("http")
    http.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
        return

    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
