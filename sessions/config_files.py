"""Read the usual ``mcpServers`` JSON (Claude Desktop, Cursor, Cline, VS Code), or an MCP registry
``server.json``, into server configs.

Pure Python: the CLI uses it too, and must not import Django.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "is_server_json", "parse_server_json", "parse_servers"]

HTTP_TYPES = {"http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}
# How a registry package runs over stdio when its server.json gives no runtimeHint.
RUNTIMES = {"npm": "npx", "pypi": "uvx", "oci": "docker", "nuget": "dnx"}


class ConfigError(ValueError):
    """The JSON does not describe MCP servers the way any known client writes them."""


def is_server_json(data: Any) -> bool:
    """Whether a parsed document is a registry server.json rather than an mcpServers file."""
    return isinstance(data, dict) and "mcpServers" not in data and ("packages" in data or "remotes" in data)


def parse_servers(data: Any) -> dict[str, dict[str, Any]]:
    """Return ``{name: config}`` from a parsed mcpServers document; raise ConfigError on bad input."""
    if is_server_json(data):
        return parse_server_json(data)
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


# --- server.json (the MCP registry's description of a server) -------------------------------------


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def _argument(item: Any) -> list[str]:
    """One runtime or package argument as command-line words; a value still to fill shows as <hint>."""
    if not isinstance(item, dict):
        return []
    value = _text(item.get("value")) or _text(item.get("default"))
    if not value:
        hint = _text(item.get("valueHint")) or _text(item.get("name")).lstrip("-") or "value"
        value = f"<{hint}>"
    if item.get("type") == "named":
        name = _text(item.get("name"))
        if not name:
            return []
        # A named flag with no value of its own (e.g. --verbose) is a word on its own.
        has_value = item.get("value") is not None or item.get("default") is not None or item.get("valueHint")
        return [name, value] if has_value else [name]
    return [value]


def _arguments(items: Any) -> list[str]:
    return [word for item in items if isinstance(items, list) for word in _argument(item)] if items else []


def _package(package: dict[str, Any], where: str) -> dict[str, Any]:
    registry = _text(package.get("registryType") or package.get("registry_name"))
    identifier = _text(package.get("identifier") or package.get("name"))
    version = _text(package.get("version"))
    if not identifier:
        raise ConfigError(f"{where} has no identifier")
    transport = _object(package.get("transport"))
    kind = _text(transport.get("type")) or "stdio"
    if kind != "stdio":
        url = _text(transport.get("url"))
        if kind not in HTTP_TYPES or not url.lower().startswith(("http://", "https://")):
            raise ConfigError(f"{where}: a {kind!r} package needs an http(s) url")
        return {"transport": HTTP_TYPES[kind], "url": url, "headers": {}}
    runtime = _text(package.get("runtimeHint")) or RUNTIMES.get(registry, "")
    if not runtime:
        raise ConfigError(
            f"{where}: cannot tell how to run a {registry or 'package'!r} package (no runtimeHint)"
        )
    spec = identifier
    if version and registry == "npm":
        spec = f"{identifier}@{version}"
    elif version and registry == "pypi":
        spec = f"{identifier}=={version}"
    elif version and registry == "nuget":
        spec = f"{identifier}@{version}"
    runtime_args = _arguments(package.get("runtimeArguments"))
    if not runtime_args:
        runtime_args = {"npx": ["-y"], "docker": ["run", "-i", "--rm"], "dnx": ["--yes"]}.get(runtime, [])
    env: dict[str, str] = {}
    secret: list[str] = []
    for variable in package.get("environmentVariables") or []:
        if not isinstance(variable, dict) or not _text(variable.get("name")):
            continue
        name = _text(variable["name"])
        env[name] = _text(variable.get("value")) or _text(variable.get("default"))
        if variable.get("isSecret"):
            secret.append(name)
    return {
        "transport": "stdio",
        "command": runtime,
        "args": [*runtime_args, spec, *_arguments(package.get("packageArguments"))],
        "env": env,
        "secret_env": secret,
        "cwd": "",
    }


def _remote(remote: dict[str, Any], where: str) -> dict[str, Any]:
    kind = _text(remote.get("type") or remote.get("transport_type"))
    url = _text(remote.get("url"))
    variables = _object(remote.get("variables"))
    for name, variable in variables.items():
        default = _text(variable.get("default")) if isinstance(variable, dict) else ""
        url = url.replace("{" + str(name) + "}", default or "{" + str(name) + "}")
    if kind not in HTTP_TYPES or not url.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where} needs a streamable-http or sse type and an http(s) url")
    headers = {
        _text(h.get("name")): _text(h.get("value")) or _text(h.get("default"))
        for h in remote.get("headers") or []
        if isinstance(h, dict) and _text(h.get("name"))
    }
    return {"transport": HTTP_TYPES[kind], "url": url, "headers": headers}


def parse_server_json(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Return a config per package and per remote of a registry server.json.

    Each package runs through its runtime (npm with ``npx -y id@version``, PyPI with ``uvx
    id==version``, OCI with ``docker run -i --rm``, NuGet with ``dnx``, or its ``runtimeHint``);
    arguments with no value yet show as ``<hint>`` to be filled in, and secret variables are marked.
    """
    base = _text(data.get("title")) or _text(data.get("name")) or "server"
    entries: list[tuple[str, dict[str, Any]]] = []
    for i, package in enumerate(data.get("packages") or []):
        if isinstance(package, dict):
            registry = _text(package.get("registryType") or package.get("registry_name")) or "package"
            entries.append((registry, _package(package, f"package {i + 1} of {base!r}")))
    for i, remote in enumerate(data.get("remotes") or []):
        if isinstance(remote, dict):
            entries.append(("remote", _remote(remote, f"remote {i + 1} of {base!r}")))
    if not entries:
        raise ConfigError(f"server.json {base!r} has no packages or remotes to connect to")
    configs: dict[str, dict[str, Any]] = {}
    for label, config in entries:
        name = base if len(entries) == 1 else f"{base} ({label})"
        while name in configs:
            name += "'"
        configs[name] = {"name": name, **config}
    return configs
