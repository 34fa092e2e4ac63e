"""Replay against…'s form: the target (the session's own server, a saved server of its team, or a new
command or URL as the connect form takes them) and whether a slower step counts as a change."""

from __future__ import annotations

from typing import Any

from django import forms

from sessions.servers import DEFAULT_PROTOCOL_VERSION, TRANSPORTS
from sessions.web.forms import ConnectForm

__all__ = ["NEW", "OWN", "ReplayForm"]

OWN = "own"
"""The target choice that means the session's own server (its recorded config)."""
NEW = "new"
"""The target choice that means the command or URL typed in the form."""

# The connect form's fields a new target is made of; the replay opens as the recorded client did, so
# its revision and capabilities are not asked for.
NEW_TARGET_FIELDS = ("transport", "command", "url", "env", "headers")


class ReplayForm(forms.Form):
    """What to replay against; ``saved_pk`` or ``new_config`` once valid."""

    target = forms.CharField(max_length=20, error_messages={"required": "Pick what to replay against."})
    no_latency = forms.BooleanField(
        required=False, label="Do not count a step that became slower as a change (timing is noise here)"
    )
    transport = forms.ChoiceField(choices=list(TRANSPORTS), initial="stdio", required=False)
    command = forms.CharField(
        max_length=4000, required=False, help_text="program and arguments, as in a shell"
    )
    url = forms.CharField(
        max_length=2000,
        required=False,
        label="URL",
        widget=forms.TextInput(attrs={"placeholder": "http://127.0.0.1:3001/mcp"}),
    )
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="KEY=value, a line each (stdio)"
    )
    headers = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        help_text="Name: value, a line each (HTTP)",
    )

    saved_pk: int | None = None
    new_config: dict[str, Any] | None = None

    def clean_target(self) -> str:
        choice = str(self.cleaned_data["target"])
        if choice in (OWN, NEW):
            return choice
        if not choice.isascii() or not choice.isdigit() or len(choice) > 18:
            raise forms.ValidationError(
                "Pick a saved server, this session's own server or a new target to replay against."
            )
        self.saved_pk = int(choice)
        return choice

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("target") != NEW:
            return data
        connect = ConnectForm(
            {
                **{name: self.data.get(name, "") for name in NEW_TARGET_FIELDS},
                "transport": data.get("transport") or "stdio",
                "protocol_version": DEFAULT_PROTOCOL_VERSION,
                "mode": "handshake",
                "oauth": "on",
                "verify_tls": "on",
                "timeout": "60",
                "max_total_timeout": "600",
            }
        )
        if not connect.is_valid():
            for name, errors in connect.errors.items():
                for error in errors:
                    self.add_error(name if name in self.fields else None, error)
            return data
        self.new_config = connect.snapshot()
        return data

    @property
    def problem(self) -> str:
        """The form's errors as one sentence for the page."""
        parts = []
        for name, errors in self.errors.items():
            label = "" if name in ("__all__", "target") else f"{self.fields[name].label or name}: "
            parts += [f"{label}{error}" for error in errors]
        return "; ".join(parts)
