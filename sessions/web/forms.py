"""Forms: connecting to a server, importing mcpServers JSON."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser
from django.utils.functional import cached_property

from sessions.config_files import parse_servers
from sessions.engine import mask_headers
from sessions.models import ServerConfig
from sessions.servers import (
    DEFAULT_PROTOCOL_VERSION,
    HANDSHAKE_VERSIONS,
    STATELESS_VERSIONS,
    TRANSPORTS,
    secret_env_names,
    split_command,
)
from sessions.teams.access import Scope
from sessions.web.shortcuts import parse_json

__all__ = ["ConnectForm", "ImportForm", "ServerForm"]

# Newest handshake revision first, then the stateless ones.
VERSIONS = [(v, v) for v in reversed(HANDSHAKE_VERSIONS)] + [
    (v, f"{v} (stateless)") for v in STATELESS_VERSIONS
]
MODES = [
    ("handshake", "handshake (initialize)"),
    ("stateless", "stateless (server/discover, 2026-07-28)"),
    ("auto", "auto: try discovery, fall back to the handshake"),
]
CAPABILITIES = {
    "roots": "roots",
    "roots_list_changed": "roots: listChanged",
    "sampling": "sampling",
    "sampling_tools": "sampling: tools",
    "elicitation_form": "elicitation: form",
    "elicitation_url": "elicitation: url",
    "tasks": "tasks",
    "apps": "MCP Apps (io.modelcontextprotocol/ui)",
    "review_roots": "ask me before answering roots/list",
}


# The connect form's collapsed sections (<details>), by the fields each holds: a section holding a
# field with an error is rendered open, or Connect would seem to do nothing.
SECTIONS = {
    "stdio_more": ("args", "env", "secret_env", "cwd"),
    "http_auth": ("headers", "bearer_token"),
    "oauth": ("oauth", "client_id", "client_secret", "client_metadata_url", "oauth_scope"),
    "tls": ("verify_tls", "ca_file"),
    "protocol": (
        "protocol_version",
        "mode",
        "roots_cap",
        "roots_list_changed",
        "sampling",
        "sampling_tools",
        "elicitation_form",
        "elicitation_url",
        "tasks",
        "apps",
        "review_roots",
        "roots",
        "timeout",
        "max_total_timeout",
    ),
}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


class ConnectForm(forms.Form):
    """Everything needed to open a session; ``snapshot()`` is what the runtime starts from."""

    name = forms.CharField(max_length=200, required=False, help_text="defaults to the command or URL")
    transport = forms.ChoiceField(choices=list(TRANSPORTS), initial="stdio")
    command = forms.CharField(
        max_length=4000, required=False, help_text="program and arguments, as in a shell"
    )
    args = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="one more argument a line"
    )
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="KEY=value, a line each"
    )
    secret_env = forms.CharField(
        max_length=1000,
        required=False,
        help_text="names of env values to mask (token/secret/key names always are)",
    )
    cwd = forms.CharField(max_length=1000, required=False, label="Working directory")
    url = forms.CharField(
        max_length=2000,
        required=False,
        label="URL",
        widget=forms.TextInput(attrs={"placeholder": "http://127.0.0.1:3001/mcp"}),
    )
    headers = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="Name: value, a line each"
    )
    # Kept when the form comes back with errors (an unbound form has no value to render): the
    # person's own response, same-origin and no-store (middleware), never a URL or a log. Holding it
    # server-side instead would write the secret into the session store.
    bearer_token = forms.CharField(
        max_length=4000, required=False, widget=forms.PasswordInput(render_value=True)
    )
    oauth = forms.BooleanField(
        required=False,
        initial=True,
        label="Authorize with OAuth when the server asks",
        help_text="a server that answers 401 starts the OAuth flow",
    )
    client_id = forms.CharField(
        max_length=1000, required=False, label="Client ID", help_text="a pre-registered client (optional)"
    )
    # Kept on a form that comes back with errors, as the bearer token is (see above).
    client_secret = forms.CharField(
        max_length=4000,
        required=False,
        label="Client secret",
        widget=forms.PasswordInput(render_value=True, attrs={"autocomplete": "off"}),
    )
    client_metadata_url = forms.CharField(
        max_length=2000,
        required=False,
        label="Client metadata URL",
        help_text="a Client ID Metadata Document (https://), used where the server supports it",
    )
    oauth_scope = forms.CharField(
        max_length=1000, required=False, label="Scopes", help_text="default: the ones the server names"
    )
    verify_tls = forms.BooleanField(required=False, initial=True, label="Verify TLS certificates")
    ca_file = forms.CharField(
        max_length=1000,
        required=False,
        label="CA certificates file",
        help_text="a PEM file on this machine to trust instead of the public CAs (a local CA, mkcert)",
    )
    protocol_version = forms.ChoiceField(choices=VERSIONS, initial=DEFAULT_PROTOCOL_VERSION)
    mode = forms.ChoiceField(choices=MODES, initial="handshake", label="Connection mode", required=False)
    roots_cap = forms.BooleanField(required=False, initial=True, label=CAPABILITIES["roots"])
    roots_list_changed = forms.BooleanField(
        required=False, initial=True, label=CAPABILITIES["roots_list_changed"]
    )
    sampling = forms.BooleanField(required=False, initial=True, label=CAPABILITIES["sampling"])
    sampling_tools = forms.BooleanField(required=False, initial=True, label=CAPABILITIES["sampling_tools"])
    elicitation_form = forms.BooleanField(
        required=False, initial=True, label=CAPABILITIES["elicitation_form"]
    )
    elicitation_url = forms.BooleanField(required=False, initial=True, label=CAPABILITIES["elicitation_url"])
    tasks = forms.BooleanField(required=False, initial=True, label=CAPABILITIES["tasks"])
    apps = forms.BooleanField(required=False, initial=True, label=CAPABILITIES["apps"])
    review_roots = forms.BooleanField(required=False, initial=False, label=CAPABILITIES["review_roots"])
    roots = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        help_text="file:// URI and an optional name, a line each",
    )
    timeout = forms.FloatField(
        min_value=0, initial=60, help_text="seconds without a response or progress (0: none)"
    )
    max_total_timeout = forms.FloatField(
        min_value=0, initial=600, label="Maximum total", help_text="seconds (0: none)"
    )
    save = forms.BooleanField(required=False, label="Save this server")

    @cached_property
    def open_sections(self) -> set[str]:
        """The collapsed sections that hold a field with an error (``SECTIONS``)."""
        return {name for name, fields in SECTIONS.items() if any(f in self.errors for f in fields)}

    def clean_args(self) -> list[str]:
        return _lines(self.cleaned_data["args"])

    def clean_env(self) -> dict[str, str]:
        env = {}
        for line in _lines(self.cleaned_data["env"]):
            name, sep, value = line.partition("=")
            if not sep or not name.strip():
                raise forms.ValidationError(f"expected KEY=value, got {line!r}")
            env[name.strip()] = value
        return env

    def clean_headers(self) -> dict[str, str]:
        headers = {}
        for line in _lines(self.cleaned_data["headers"]):
            name, sep, value = line.partition(":")
            if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name.strip()):
                raise forms.ValidationError(f"expected Name: value, got {line!r}")
            headers[name.strip()] = value.strip()
        return headers

    def clean_roots(self) -> list[dict[str, str]]:
        roots = []
        for line in _lines(self.cleaned_data["roots"]):
            uri, _, name = line.partition(" ")
            if not uri.startswith("file://"):
                raise forms.ValidationError(f"roots are file:// URIs; got {uri!r}")
            roots.append({"uri": uri, "name": name.strip()} if name.strip() else {"uri": uri})
        return roots

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        if data["transport"] == "stdio":
            try:
                words = split_command(data.get("command", ""))
            except ValueError as exc:
                raise forms.ValidationError({"command": str(exc)}) from None
            if not words:
                raise forms.ValidationError({"command": "a stdio server needs a command"})
            data["command_words"] = words
        else:
            url = data.get("url", "")
            if not url.lower().startswith(("http://", "https://")):
                raise forms.ValidationError({"url": "an HTTP server needs an http:// or https:// URL"})
            metadata_url = data.get("client_metadata_url", "").strip()
            if metadata_url and not metadata_url.lower().startswith("https://"):
                raise forms.ValidationError(
                    {"client_metadata_url": "a client metadata document URL must be https://"}
                )
            ca_file = data.get("ca_file", "").strip()
            if ca_file and not Path(ca_file).is_file():
                raise forms.ValidationError({"ca_file": f"no such file on this machine: {ca_file}"})
        return data

    def snapshot(self) -> dict[str, Any]:
        """Return the config the runtime starts from."""
        data = self.cleaned_data
        stdio = data["transport"] == "stdio"
        words = data.get("command_words", [])
        marked = [n.strip() for n in data["secret_env"].split(",") if n.strip()]
        return {
            "name": data["name"] or (" ".join(words)[:200] if stdio else data["url"][:200]),
            "transport": data["transport"],
            "command": words[0] if stdio else "",
            "args": [*words[1:], *data["args"]] if stdio else [],
            "env": data["env"] if stdio else {},
            "secret_env": secret_env_names(data["env"], marked),
            "cwd": data["cwd"] if stdio else "",
            "url": "" if stdio else data["url"],
            "headers": {} if stdio else data["headers"],
            "bearer_token": "" if stdio else data["bearer_token"],
            "oauth": {} if stdio else self._oauth(),
            "verify_tls": True if stdio else data["verify_tls"],
            "ca_file": "" if stdio else data["ca_file"].strip(),
            "protocol_version": data["protocol_version"],
            "mode": data.get("mode") or "handshake",
            "capabilities": {
                "roots": data["roots_cap"],
                "roots_list_changed": data["roots_list_changed"],
                "sampling": data["sampling"],
                "sampling_tools": data["sampling_tools"],
                "elicitation_form": data["elicitation_form"],
                "elicitation_url": data["elicitation_url"],
                "tasks": data["tasks"],
                "apps": data["apps"],
                "review_roots": data["review_roots"],
            },
            "timeout": data["timeout"] or None,
            "max_total_timeout": data["max_total_timeout"] or None,
        }

    def _oauth(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "enabled": bool(data.get("oauth")),
            "client_id": data.get("client_id", "").strip(),
            "client_secret": data.get("client_secret", ""),
            "client_metadata_url": data.get("client_metadata_url", "").strip(),
            "scope": " ".join(data.get("oauth_scope", "").split()),
        }

    def save_server(self, scope: Scope, owner: AbstractBaseUser) -> ServerConfig:
        """Save (or update) this server under its name in the person's team."""
        config = self.snapshot()
        fields = {k: v for k, v in config.items() if k != "name"}
        fields["timeout"] = fields["timeout"] or 0
        fields["max_total_timeout"] = fields["max_total_timeout"] or 0
        server, _ = ServerConfig.objects.update_or_create(
            team_id=scope.team_id, name=config["name"], defaults={**fields, "owner": owner}
        )
        return server


def _secret(label: str) -> forms.CharField:
    # render_value: a form that comes back with errors keeps what the person typed (never what is stored:
    # the field has no initial value).
    widget = forms.PasswordInput(render_value=True, attrs={"autocomplete": "off"})
    return forms.CharField(max_length=4000, required=False, label=label, widget=widget)


class ServerForm(ConnectForm):
    """A saved server, edited: ``ConnectForm``'s fields filled from it, its secrets never shown.

    The bearer token, the secret env values and the credential headers each get a field of their own,
    empty: left blank, the stored value stays; its "remove" box removes it; typed, it replaces it.
    """

    clear_bearer_token = forms.BooleanField(required=False, label="Remove the stored bearer token")
    clear_client_secret = forms.BooleanField(required=False, label="Remove the stored client secret")

    def __init__(self, server: ServerConfig, data: Any = None) -> None:
        self.server = server
        stored_env = dict(server.env or {})
        stored_headers = dict(server.headers or {})
        masked = mask_headers(stored_headers)
        self.kept_env = [n for n in secret_env_names(stored_env, server.secret_env) if n in stored_env]
        self.kept_headers = sorted(n for n in stored_headers if masked[n] != stored_headers[n])
        caps = server.capabilities if isinstance(server.capabilities, dict) else {}
        oauth = dict(server.oauth or {})
        self.has_client_secret = bool(oauth.get("client_secret"))
        stdio = server.transport == "stdio"
        initial = {
            "name": server.name,
            "transport": server.transport,
            "command": shlex.join([server.command, *map(str, server.args or [])]) if stdio else "",
            "env": "\n".join(f"{k}={v}" for k, v in stored_env.items() if k not in self.kept_env),
            "secret_env": ", ".join(server.secret_env or []),
            "cwd": server.cwd,
            "url": server.url,
            "headers": "\n".join(
                f"{k}: {v}" for k, v in stored_headers.items() if k not in self.kept_headers
            ),
            "verify_tls": server.verify_tls,
            "oauth": bool(oauth.get("enabled", True)),
            "client_id": oauth.get("client_id", ""),
            "client_metadata_url": oauth.get("client_metadata_url", ""),
            "oauth_scope": oauth.get("scope", ""),
            "ca_file": server.ca_file,
            "protocol_version": server.protocol_version,
            "mode": server.mode,
            "timeout": server.timeout,
            "max_total_timeout": server.max_total_timeout,
        }
        super().__init__(data, initial=initial)
        for key, name in (("roots", "roots_cap"), *((k, k) for k in CAPABILITIES if k != "roots")):
            self.fields[name].initial = bool(caps.get(key, self.fields[name].initial))
        for name in ("roots", "save"):  # a saved server has no roots of its own, and is saved already
            del self.fields[name]
        self.fields["name"].required = True
        self.fields["bearer_token"] = _secret("Bearer token")
        self.fields["client_secret"] = _secret("Client secret")
        for kind, names in (("env", self.kept_env), ("header", self.kept_headers)):
            for name in names:
                self.fields[f"secret:{kind}:{name}"] = _secret(name)
                self.fields[f"clear:{kind}:{name}"] = forms.BooleanField(
                    required=False, label=f"Remove {name}"
                )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        words = data.get("command_words") or [""]
        if len(words[0]) > ServerConfig._meta.get_field("command").max_length:  # type: ignore[operator]
            raise forms.ValidationError({"command": "the program's name is too long to save"})
        return data

    def _secret_rows(self, kind: str, names: list[str]) -> list[tuple[forms.BoundField, forms.BoundField]]:
        return [(self[f"secret:{kind}:{n}"], self[f"clear:{kind}:{n}"]) for n in names]

    @property
    def env_secret_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        """The value and "remove" fields of each stored secret env value."""
        return self._secret_rows("env", self.kept_env)

    @property
    def header_secret_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        """The value and "remove" fields of each stored credential header."""
        return self._secret_rows("header", self.kept_headers)

    def _kept(self, kind: str, typed: dict[str, str], stored: dict[str, str], names: list[str]) -> list[str]:
        """Put each stored secret into ``typed`` unless removed (or typed anew); the names it kept."""
        kept = []
        for name in names:
            if name in typed:
                continue  # written out in the box: the new value wins
            value = self.cleaned_data.get(f"secret:{kind}:{name}") or ""
            if value or not self.cleaned_data.get(f"clear:{kind}:{name}"):
                typed[name] = value or stored[name]
                kept.append(name)
        return kept

    def config(self) -> dict[str, Any]:
        """The server's new settings: the form's, with the stored secrets kept, replaced or removed."""
        config = self.snapshot()
        server = self.server
        if config["transport"] == "stdio":
            kept = self._kept("env", config["env"], dict(server.env or {}), self.kept_env)
            config["secret_env"] = sorted({*config["secret_env"], *kept})
        else:
            self._kept("header", config["headers"], dict(server.headers or {}), self.kept_headers)
            typed = self.cleaned_data.get("bearer_token") or ""
            clear = self.cleaned_data.get("clear_bearer_token")
            config["bearer_token"] = typed or ("" if clear else server.bearer_token)
            stored = str((server.oauth or {}).get("client_secret") or "")
            secret = self.cleaned_data.get("client_secret") or ""
            clear = self.cleaned_data.get("clear_client_secret")
            config["oauth"]["client_secret"] = secret or ("" if clear else stored)
        return config

    def store(self, config: dict[str, Any]) -> ServerConfig:
        """Store ``config`` (what ``config()`` made) on the saved server."""
        for name, value in config.items():
            setattr(self.server, name, value if value is not None else 0)
        self.server.save()
        return self.server


class ImportForm(forms.Form):
    """Paste the mcpServers JSON of Claude Desktop, Cursor, Cline or VS Code, or a registry server.json."""

    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), label="mcpServers JSON")

    def clean_text(self) -> dict[str, dict[str, Any]]:
        try:
            return parse_servers(parse_json(self.cleaned_data["text"]))
        except ValueError as exc:  # JSONDecodeError and ConfigError both
            raise forms.ValidationError(str(exc)) from None

    def save(self, scope: Scope, owner: AbstractBaseUser) -> list[ServerConfig]:
        saved = []
        for name, config in self.cleaned_data["text"].items():
            fields = {k: v for k, v in config.items() if k != "name"}
            # A server.json marks its secret variables; other names that look secret are masked too.
            fields["secret_env"] = secret_env_names(fields.get("env", {}), config.get("secret_env"))
            server, _ = ServerConfig.objects.update_or_create(
                team_id=scope.team_id, name=name, defaults={**fields, "owner": owner}
            )
            saved.append(server)
        return saved
