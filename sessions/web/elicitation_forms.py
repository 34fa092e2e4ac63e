"""Forms generated from an elicitation's ``requestedSchema``, and typed validation of what a person typed.

The schema is the flat object of primitives the protocol allows: strings (with ``format``, length
limits, ``enum``/``oneOf``/``enumNames``), numbers and integers (with bounds), booleans, and arrays
of enum strings (multi-select). Anything else falls back to a text input whose value is sent as typed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Protocol

__all__ = ["FormField", "fields_of", "has_errors", "validate"]

# Input types for string formats; date-time uses a datetime-local input read as UTC.
FORMAT_INPUTS = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


class FormData(Protocol):
    def get(self, key: str, default: Any = ..., /) -> Any: ...
    def getlist(self, key: str) -> list[Any]: ...


@dataclass
class FormField:
    """One property of the requested schema, as an input the template can render."""

    name: str
    title: str
    description: str
    kind: str  # text, email, url, date, datetime-local, number, checkbox, select, multi
    required: bool
    schema: dict[str, Any]
    options: list[tuple[str, str]] = field(default_factory=list)
    value: Any = None
    error: str = ""

    @property
    def input_name(self) -> str:
        """The form field's name: prefixed so a property can never clash with csrf or other fields."""
        return f"f-{self.name}"

    @property
    def shown_value(self) -> str:
        """The value for a single input's ``value`` attribute."""
        if self.value is None:
            return ""
        if self.kind == "datetime-local" and isinstance(self.value, str):
            return self.value.removesuffix("Z")[:19]
        return str(self.value)

    @property
    def chosen(self) -> list[str]:
        """The selected options (select and multi)."""
        if isinstance(self.value, list):
            return [str(v) for v in self.value]
        return [] if self.value is None else [str(self.value)]

    @property
    def checked(self) -> bool:
        return self.value is True

    @property
    def limits(self) -> str:
        """A short note of the constraints, e.g. "1–100" or "at most 3"."""
        s = self.schema
        low, high = (s.get("minimum"), s.get("maximum")) if self.kind == "number" else (None, None)
        if self.kind in ("text", "email", "url"):
            low, high = s.get("minLength"), s.get("maxLength")
        if self.kind == "multi":
            low, high = s.get("minItems"), s.get("maxItems")
        unit = {"multi": " choices", "text": " characters", "email": " characters", "url": " characters"}
        suffix = unit.get(self.kind, "")
        if low is not None and high is not None:
            return f"{low}–{high}{suffix}"
        if low is not None:
            return f"at least {low}{suffix}"
        if high is not None:
            return f"at most {high}{suffix}"
        return ""


def _options(schema: dict[str, Any]) -> list[tuple[str, str]] | None:
    """Return (value, label) pairs of an enum-like schema, or None when it is not one."""
    if isinstance(schema.get("enum"), list):
        names = schema.get("enumNames")
        values = [str(v) for v in schema["enum"]]
        if isinstance(names, list) and len(names) == len(values):
            return [(v, str(n)) for v, n in zip(values, names, strict=True)]
        return [(v, v) for v in values]
    for key in ("oneOf", "anyOf"):
        choices = schema.get(key)
        if isinstance(choices, list) and all(isinstance(c, dict) and "const" in c for c in choices):
            return [(str(c["const"]), str(c.get("title", c["const"]))) for c in choices]
    return None


def _kind(schema: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    kind = schema.get("type")
    if kind == "array":
        options = _options(schema.get("items") or {})
        return ("multi", options) if options is not None else ("text", [])
    options = _options(schema)
    if options is not None:
        return "select", options
    if kind == "boolean":
        return "checkbox", []
    if kind in ("number", "integer"):
        return "number", []
    if kind == "string":
        return FORMAT_INPUTS.get(str(schema.get("format", "")), "text"), []
    return "text", []


def fields_of(schema: Any) -> list[FormField]:
    """Return the form fields of a requested schema, defaults as their values."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = set(schema.get("required") or [])
    fields = []
    for name, prop in schema["properties"].items():
        prop = prop if isinstance(prop, dict) else {}
        kind, options = _kind(prop)
        fields.append(
            FormField(
                name=str(name),
                title=str(prop.get("title") or name),
                description=str(prop.get("description") or ""),
                kind=kind,
                required=name in required,
                schema=prop,
                options=options,
                value=prop.get("default"),
            )
        )
    return fields


def _number(text: str, schema: dict[str, Any]) -> int | float:
    if schema.get("type") == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("must be a whole number") from None
    try:
        value = float(text)
    except ValueError:
        raise ValueError("must be a number") from None
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return int(value) if value.is_integer() and not re.search(r"[.eE]", text) else value


def _check_bounds(value: float, schema: dict[str, Any]) -> None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(low, int | float) and value < low:
        raise ValueError(f"must be at least {low}")
    if isinstance(high, int | float) and value > high:
        raise ValueError(f"must be at most {high}")


def _string(text: str, f: FormField) -> str:
    s = f.schema
    if f.kind == "datetime-local":
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError("must be a date and time") from None
        text = moment.isoformat() if moment.tzinfo else moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    elif f.kind == "date":
        try:
            date.fromisoformat(text)
        except ValueError:
            raise ValueError("must be a date (YYYY-MM-DD)") from None
    elif f.kind == "email" and not _EMAIL.match(text):
        raise ValueError("must be an email address")
    elif f.kind == "url" and not _URI.match(text):
        raise ValueError("must be a URI, e.g. https://example.com/")
    low, high = s.get("minLength"), s.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        raise ValueError(f"must be at least {low} characters")
    if isinstance(high, int) and len(text) > high:
        raise ValueError(f"must be at most {high} characters")
    return text


def _typed(f: FormField, data: FormData) -> tuple[bool, Any]:
    """Return (present, value) for one field; raise ValueError with a message when invalid."""
    if f.kind == "checkbox":
        return True, data.get(f.input_name) is not None
    if f.kind == "multi":
        chosen = [str(v) for v in data.getlist(f.input_name)]
        allowed = {v for v, _ in f.options}
        if any(v not in allowed for v in chosen):
            raise ValueError("is not one of the choices")
        if not chosen and not f.required:
            return False, None
        low, high = f.schema.get("minItems"), f.schema.get("maxItems")
        if isinstance(low, int) and len(chosen) < low:
            raise ValueError(f"needs at least {low} choice{'s' if low != 1 else ''}")
        if isinstance(high, int) and len(chosen) > high:
            raise ValueError(f"allows at most {high} choices")
        return True, chosen
    text = str(data.get(f.input_name) or "").strip()
    if text == "":
        if f.required:
            raise ValueError("is required")
        return False, None
    if f.kind == "select":
        if text not in {v for v, _ in f.options}:
            raise ValueError("is not one of the choices")
        if f.schema.get("type") in ("number", "integer"):
            return True, _number(text, f.schema)
        return True, text
    if f.kind == "number":
        value = _number(text, f.schema)
        _check_bounds(value, f.schema)
        return True, value
    return True, _string(text, f)


def validate(schema: Any, data: FormData) -> tuple[dict[str, Any], list[FormField]]:
    """Read the submitted form against the schema: return (typed content, fields with values and errors).

    The content is only to be sent when no field has an error.
    """
    fields = fields_of(schema)
    content: dict[str, Any] = {}
    for f in fields:
        if f.kind == "multi":
            f.value = [str(v) for v in data.getlist(f.input_name)]
        elif f.kind == "checkbox":
            f.value = data.get(f.input_name) is not None
        else:
            f.value = str(data.get(f.input_name) or "")
        try:
            present, value = _typed(f, data)
        except ValueError as exc:
            f.error = f"{f.title} {exc}"
            continue
        if present:
            content[f.name] = value
    return content, fields


def has_errors(fields: list[FormField]) -> bool:
    """Whether any field failed validation."""
    return any(f.error for f in fields)
