"""Read the usual ``mcpServers`` JSON (Claude Desktop, Cursor, Cline, VS Code) into server configs.

Pure Python: the CLI uses it too, and must not import Django.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "parse_servers"]

HTTP_TYPES = {"http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}


class ConfigError(ValueError):
    """The JSON does not describe MCP servers the way any known client writes them."""


def parse_servers(data: Any) -> dict[str, dict[str, Any]]:
    """Return ``{name: config}`` from a parsed mcpServers document; raise ConfigError on bad input."""
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError('expected an object with "mcpServers" (or VS Code\'s "servers")')
    return {str(name): parse_entry(str(name), entry) for name, entry in servers.items()}


def parse_entry(name: str, entry: Any) -> dict[str, Any]:
    """Return one server's config in the inspector's shape."""
    if not isinstance(entry, dict):
        raise ConfigError(f"server {name!r} must be an object")
    kind = entry.get("type") or entry.get("transport")
    url = entry.get("url") or entry.get("serverUrl")
    config: dict[str, Any] = {"name": name}
    if kind in HTTP_TYPES or (kind is None and url):
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            raise ConfigError(f'server {name!r} needs an http(s) "url"')
        headers = entry.get("headers") or {}
        if not isinstance(headers, dict):
            raise ConfigError(f'"headers" of server {name!r} must be an object')
        config.update(
            transport=HTTP_TYPES.get(str(kind), "auto"),
            url=url,
            headers={str(k): str(v) for k, v in headers.items()},
        )
        return config
    if kind not in (None, "stdio"):
        raise ConfigError(f"server {name!r} has an unknown type {kind!r}")
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise ConfigError(f'server {name!r} needs a "command"')
    args = entry.get("args") or []
    env = entry.get("env") or {}
    if not isinstance(args, list) or not isinstance(env, dict):
        raise ConfigError(f'"args" of server {name!r} must be a list and "env" an object')
    config.update(
        transport="stdio",
        command=command,
        args=[str(a) for a in args],
        env={str(k): str(v) for k, v in env.items()},
        cwd=str(entry.get("cwd") or ""),
    )
    return config
