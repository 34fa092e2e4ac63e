"""Forms of the team page: settings, invitations, members' roles, and the server catalog's entries.

The catalog form takes what an admin types as lines (arguments, ``name|label|pattern|required``
parameters, ``KEY=value`` variables, names) and keeps it as ``CatalogServer``'s lists and dicts. Fixed
variables' values are secrets: the form never shows them again, only ``KEY=`` and a mask; a line left
masked keeps the stored value. Neither kind may name a variable that loads code (``process_env``).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from django import forms

from sessions.engine import EgressPolicy
from sessions.teams import team_models
from sessions.teams.models import PARAM_NAME, CatalogServer, Role, Team, TeamModel
from sessions.teams.process_env import refusals
from sessions.timeline.secret_rules import pattern_problem

__all__ = [
    "MASK",
    "CatalogForm",
    "InvitationForm",
    "RoleForm",
    "TapEndpointForm",
    "TeamModelForm",
    "TeamSettingsForm",
]

MASK = "••••••••"
# A host name an allow-list may hold: labels of letters, digits and hyphens, optionally "*." first.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# A "{name}" in an argument (other braces, JSON say, are left alone: sessions.teams.policy fills only these).
PLACEHOLDER = re.compile(r"\{(" + PARAM_NAME.pattern + r")\}")
TRUE = {"", "required", "yes", "true", "1", "y"}
FALSE = {"optional", "no", "false", "0", "n"}
LONG_TEXT = 20_000


def _lines(text: str) -> list[tuple[int, str]]:
    """The non-empty lines of ``text``, stripped, with their numbers."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _refuse_code_loading(names: list[str]) -> None:
    """Refuse the variables no catalog server may get (``process_env``), each with why."""
    refused = refusals(names)
    if refused:
        raise forms.ValidationError(
            [f"{name} cannot be set on a catalog server: {why}." for name, why in refused.items()]
        )


def _names(text: str, what: str) -> list[str]:
    """Variable names, one a line (or separated by commas or spaces), each checked, without repeats."""
    names: list[str] = []
    for name in re.split(r"[\s,]+", text.strip()):
        if not name:
            continue
        if not ENV_NAME.fullmatch(name):
            raise forms.ValidationError(f"{name[:40]!r} is not a {what} name (letters, digits, _).")
        if name not in names:
            names.append(name)
    return names


class TeamSettingsForm(forms.Form):
    allow_free_stdio = forms.BooleanField(required=False, label="Operators may run any command line")
    allow_public_shares = forms.BooleanField(required=False, label="Share links anyone can open")
    egress_allow = forms.CharField(
        required=False, max_length=LONG_TEXT, widget=forms.Textarea, label="Egress allow-list"
    )
    max_live_sessions = forms.IntegerField(required=False, min_value=0, max_value=100_000)

    @classmethod
    def of(cls, team: Team) -> TeamSettingsForm:
        allow = team.egress_allow if isinstance(team.egress_allow, list) else []
        initial = {
            "allow_free_stdio": team.allow_free_stdio,
            "allow_public_shares": team.allow_public_shares,
            "egress_allow": "\n".join(str(a) for a in allow),
            "max_live_sessions": team.max_live_sessions,
        }
        return cls(initial=initial)

    def clean_egress_allow(self) -> list[str]:
        entries: list[str] = []
        for number, line in _lines(self.cleaned_data["egress_allow"]):
            try:
                entry = str(ipaddress.ip_network(line, strict=False))
            except ValueError:
                entry = line.lower().rstrip(".")
            try:
                # The engine's own reading of an entry: what is saved here is what a session uses.
                EgressPolicy.from_entries([entry])
            except ValueError:
                raise forms.ValidationError(
                    f"line {number}: {line[:60]!r} is neither a host name nor an address or CIDR"
                ) from None
            if entry not in entries:
                entries.append(entry)
        return entries

    def save(self, team: Team) -> None:
        team.allow_free_stdio = self.cleaned_data["allow_free_stdio"]
        team.allow_public_shares = self.cleaned_data["allow_public_shares"]
        team.egress_allow = self.cleaned_data["egress_allow"]
        team.max_live_sessions = self.cleaned_data["max_live_sessions"]
        fields = ["allow_free_stdio", "allow_public_shares", "egress_allow", "max_live_sessions"]
        team.save(update_fields=fields)


class InvitationForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)
    note = forms.CharField(required=False, max_length=200, label="Who it is for")
    days = forms.IntegerField(min_value=1, max_value=90, initial=7, label="Expires after (days)")


class TapEndpointForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name", help_text="what its sessions are called")
    url = forms.URLField(max_length=2000, label="Server URL", assume_scheme="https")


class TeamModelForm(forms.Form):
    name = forms.RegexField(
        regex=r"\A" + team_models.NAME.pattern + r"\Z",
        max_length=64,
        label="Name",
        help_text="letters, digits, _ . -",
        error_messages={"invalid": "1 to 64 letters, digits, '_', '.' or '-'."},
    )
    label = forms.CharField(max_length=200, required=False, label="Label")
    api = forms.ChoiceField(choices=TeamModel.Api.choices, label="API")
    url = forms.URLField(max_length=2000, label="Base URL", assume_scheme="https")
    model = forms.CharField(max_length=200, label="Model")
    api_key = forms.CharField(
        max_length=4000,
        required=False,
        strip=True,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )
    timeout = forms.FloatField(min_value=1, max_value=3600, initial=120, label="Timeout (s)")

    def clean_api_key(self) -> str:
        key = str(self.cleaned_data.get("api_key") or "")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
            raise forms.ValidationError("A key is one line of printable characters.")
        return key

    @staticmethod
    def initial_of(entry: TeamModel) -> dict[str, Any]:
        """The form's values for a model: everything but its key."""
        fields = ("name", "label", "api", "url", "model", "timeout")
        return {name: getattr(entry, name) for name in fields}


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class CatalogForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, max_length=500)
    command = forms.CharField(max_length=1000)
    args = forms.CharField(required=False, max_length=LONG_TEXT, widget=forms.Textarea, label="Arguments")
    params = forms.CharField(required=False, max_length=LONG_TEXT, widget=forms.Textarea, label="Parameters")
    env = forms.CharField(
        required=False, max_length=LONG_TEXT, widget=forms.Textarea, label="Fixed environment"
    )
    env_params = forms.CharField(
        required=False, max_length=LONG_TEXT, widget=forms.Textarea, label="Variables a person fills"
    )
    secret_env = forms.CharField(
        required=False, max_length=LONG_TEXT, widget=forms.Textarea, label="Secret variables"
    )
    cwd = forms.CharField(required=False, max_length=1000, label="Working directory")

    def __init__(self, *args: Any, team: Team, entry: CatalogServer | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team, self.entry = team, entry

    @staticmethod
    def initial_of(entry: CatalogServer) -> dict[str, str]:
        """What the edit form shows: the entry as lines, its fixed values masked."""
        params = [
            "|".join(
                [
                    str(p.get("name", "")),
                    str(p.get("label", "")),
                    str(p.get("pattern", "")),
                    "required" if p.get("required", True) else "optional",
                ]
            )
            for p in entry.params or []
            if isinstance(p, dict)
        ]
        return {
            "name": entry.name,
            "description": entry.description,
            "command": entry.command,
            "args": "\n".join(str(a) for a in entry.args or []),
            "params": "\n".join(params),
            "env": "\n".join(f"{key}={MASK}" for key in (entry.env or {})),
            "env_params": "\n".join(str(n) for n in entry.env_params or []),
            "secret_env": "\n".join(str(n) for n in entry.secret_env or []),
            "cwd": entry.cwd,
        }

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        taken = CatalogServer.objects.filter(team=self.team, name=name)
        if self.entry is not None:
            taken = taken.exclude(pk=self.entry.pk)
        if taken.exists():
            raise forms.ValidationError("The team's catalog already has a server of that name.")
        return name

    def clean_args(self) -> list[str]:
        return [line for _, line in _lines(self.cleaned_data["args"])]

    def clean_params(self) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = []
        for number, line in _lines(self.cleaned_data["params"]):
            name, _, rest = line.partition("|")
            label, _, rest = rest.partition("|")
            # The pattern may hold "|" itself: the last field is "required" only if it reads like one.
            pattern, bar, last = rest.rpartition("|")
            if not bar or last.strip().lower() not in TRUE | FALSE:
                pattern, last = rest, ""
            name, pattern = name.strip(), pattern.strip()
            if not PARAM_NAME.fullmatch(name):
                raise forms.ValidationError(f"line {number}: {name[:40]!r} is not a parameter name")
            if any(p["name"] == name for p in params):
                raise forms.ValidationError(f"line {number}: {name} is there twice")
            if len(pattern) > 500:
                raise forms.ValidationError(f"line {number}: the pattern is longer than 500 characters")
            if error := pattern_problem(pattern):
                problem = f"line {number}: the pattern is not a regular expression: {error}"
                raise forms.ValidationError(problem)
            required = last.strip().lower() not in FALSE
            params.append(
                {"name": name, "label": label.strip() or name, "pattern": pattern, "required": required}
            )
        return params

    def clean_env(self) -> dict[str, str]:
        stored = self.entry.env if self.entry is not None and isinstance(self.entry.env, dict) else {}
        env: dict[str, str] = {}
        for number, line in _lines(self.cleaned_data["env"]):
            key, equals, value = line.partition("=")
            key = key.strip()
            if not equals or not ENV_NAME.fullmatch(key):
                raise forms.ValidationError(f"line {number}: write KEY=value (a variable name, then =)")
            if value == MASK:
                if key not in stored:
                    raise forms.ValidationError(f"line {number}: type {key}'s value")
                value = str(stored[key])
            env[key] = value
        _refuse_code_loading(list(env))
        return env

    def clean_env_params(self) -> list[str]:
        names = _names(self.cleaned_data["env_params"], "variable")
        _refuse_code_loading(names)
        return names

    def clean_secret_env(self) -> list[str]:
        return _names(self.cleaned_data["secret_env"], "variable")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        params = {p["name"] for p in data.get("params") or []}
        for arg in data.get("args") or []:
            for name in PLACEHOLDER.findall(arg):
                if name not in params:
                    self.add_error("args", f"{{{name}}} names no parameter: add it under Parameters")
        declared = set(data.get("env") or {}) | set(data.get("env_params") or [])
        for name in data.get("secret_env") or []:
            if name not in declared:
                self.add_error("secret_env", f"{name} is neither a fixed variable nor one a person fills")
        return data

    def save(self) -> CatalogServer:
        entry = self.entry or CatalogServer(team=self.team)
        for field in self.fields:
            setattr(entry, field, self.cleaned_data[field])
        entry.save()
        return entry
