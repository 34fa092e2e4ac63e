"""Form fields from a tool's JSON Schema, and the arguments back from a submitted form.

Pure data: ``build_form`` returns a tree of ``FormField`` dataclasses that templates render
recursively; ``parse_submission`` walks the same tree over the POST data and returns the arguments
with the right JSON types plus per-field errors. Nothing here builds HTML.

Names are stable and unique: ``arg.<key>.<key>`` for nested properties (keys escaped so that dots
cannot collide), ``arg.<key>.<n>`` for array item slots, ``arg.<key>.~variant`` for the anyOf/oneOf
choice with ``arg.<key>.~<n>`` for each variant's own input, and ``arg.<key>.~null`` for an explicit null.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sessions.web.shortcuts import parse_json

__all__ = ["FormField", "Option", "build_form", "default_arguments", "parse_submission"]

PREFIX = "arg"
MAX_DEPTH = 8
EXTRA_SLOTS = 2
_LONG_TEXT = re.compile(r"text|content|prompt|message|body|query|description|code|script|markdown|html|sql")
_SCALARS = ("string", "integer", "number", "boolean")


@dataclass
class Option:
    value: str
    label: str
    selected: bool = False


@dataclass
class FormField:
    """One input (or group of inputs) of the form, with what the template needs to render it."""

    name: str
    id: str
    key: str
    label: str
    kind: str  # text, textarea, number, integer, boolean, select, object, array, choice, json
    required: bool = False
    nullable: bool = False
    description: str = ""
    hints: list[str] = field(default_factory=list)
    value: str = ""
    null_checked: bool = False
    options: list[Option] = field(default_factory=list)
    children: list[FormField] = field(default_factory=list)
    error: str = ""
    input_type: str = "text"
    schema: Any = None
    enum: list[Any] = field(default_factory=list)
    item_schema: Any = None
    is_item: bool = False
    variant: str = ""  # a variant of a choice: the option that picks it
    hidden: bool = False  # a variant not picked: not shown (its fields, their stars), not read
    enforced: bool = False
    """The browser checks it is filled before sending: required at every level above it, in no
    variant (a hidden input cannot be asked for) and not nullable (its null box stands for a value)."""
    bounds: dict[str, str] = field(default_factory=dict)
    """The schema's limits as the input's own attributes (min, max, minlength, maxlength)."""

    @property
    def null_name(self) -> str:
        return f"{self.name}.~null"

    @property
    def variant_name(self) -> str:
        return f"{self.name}.~variant"


def _segment(key: str) -> str:
    return key.replace("%", "%25").replace(".", "%2E").replace("~", "%7E")


class _Builder:
    def __init__(self, root: Any, data: Mapping[str, Any] | None, errors: Mapping[str, str]) -> None:
        self.root = root if isinstance(root, dict) else {}
        self.data = data
        self.errors = errors
        self.count = 0

    def next_id(self) -> str:
        self.count += 1
        return f"tf-{self.count}"

    def submitted(self, name: str) -> str | None:
        if self.data is None:
            return None
        value = self.data.get(name)
        return None if value is None else str(value)

    # $ref and composition ------------------------------------------------------------------------

    def resolve(self, schema: Any, seen: tuple[str, ...]) -> tuple[Any, tuple[str, ...], bool]:
        """Follow local $refs; report a cycle or an unresolvable ref as the third item."""
        hops = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if ref in seen or hops > MAX_DEPTH:
                return schema, seen, True
            target = _pointer(self.root, ref)
            if target is None:
                return schema, seen, True
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **extra} if isinstance(target, dict) else target
            seen = (*seen, ref)
            hops += 1
        if isinstance(schema, dict) and isinstance(schema.get("allOf"), list):
            merged = _merge_all_of(schema, self, seen)
            if merged is None:
                return schema, seen, True
            schema = merged
        return schema, seen, False

    # fields --------------------------------------------------------------------------------------

    def build(
        self, schema: Any, name: str, key: str, required: bool, depth: int, seen: tuple[str, ...]
    ) -> FormField:
        schema, seen, broken = self.resolve(schema, seen)
        if not isinstance(schema, dict):
            schema = {} if schema is True or schema is None else {"not": {}}
        title = schema.get("title")
        spec = FormField(
            name=name,
            id=self.next_id(),
            key=key,
            label=str(title) if isinstance(title, str) and title and title != key else key,
            kind="json",
            required=required,
            description=str(schema.get("description") or ""),
            schema=schema,
            error=self.errors.get(name, ""),
        )
        if spec.label != key and key:
            spec.label = f"{key} ({spec.label})"
        spec.hints = _hints(schema)
        types = _types(schema)
        spec.nullable = "null" in types or schema.get("nullable") is True
        non_null = [t for t in types if t != "null"]
        variants = schema.get("anyOf") or schema.get("oneOf")
        if broken or depth > MAX_DEPTH:
            return self.as_json(spec, schema)
        if isinstance(variants, list) and variants:
            real = [v for v in variants if not _is_null_schema(v)]
            if len(real) < len(variants):
                spec.nullable = True
            if len(real) == 1:
                # Optional[X] as JSON Schema writes it: X, nullable.
                base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                inner = real[0] if isinstance(real[0], dict) else {}
                merged = {**base, **inner}
                if "description" in base:
                    merged["description"] = base["description"]
                child = self.build(merged, name, key, required, depth, seen)
                child.nullable = True
                child.null_checked = self.submitted(child.null_name) is not None
                child.label = spec.label
                return child
            return self.as_choice(spec, real, depth, seen, "oneOf" if "oneOf" in schema else "anyOf")
        if len(non_null) > 1:
            alternatives = [{**schema, "type": t} for t in non_null]
            return self.as_choice(spec, alternatives, depth, seen, "type")
        kind = non_null[0] if non_null else _guess_type(schema)
        spec.null_checked = spec.nullable and self.submitted(spec.null_name) is not None
        if "const" in schema:
            return self.as_select(spec, [schema["const"]])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.as_select(spec, schema["enum"])
        if kind == "boolean":
            return self.as_boolean(spec, schema)
        if kind in ("integer", "number"):
            return self.as_number(spec, schema, kind)
        if kind == "string":
            return self.as_string(spec, schema)
        if kind == "object":
            return self.as_object(spec, schema, depth, seen)
        if kind == "array":
            return self.as_array(spec, schema, depth, seen)
        return self.as_json(spec, schema)

    def initial(self, spec: FormField, schema: dict[str, Any]) -> tuple[str | None, Any, bool]:
        """Return (submitted text, default, has default)."""
        return self.submitted(spec.name), schema.get("default"), "default" in schema

    def as_json(self, spec: FormField, schema: dict[str, Any]) -> FormField:
        spec.kind = "json"
        sent, default, has_default = self.initial(spec, schema)
        if sent is not None:
            spec.value = sent
        elif has_default:
            spec.value = json.dumps(default, indent=2, ensure_ascii=False)
        spec.hints = [*spec.hints, "JSON"]
        return spec

    def as_select(self, spec: FormField, values: list[Any]) -> FormField:
        spec.kind = "select"
        spec.enum = list(values)
        sent, default, has_default = self.initial(spec, spec.schema)
        chosen = sent if sent is not None else (_option_value(default) if has_default else None)
        if chosen is None and spec.required and len(values) == 1:
            chosen = _option_value(values[0])
        if not spec.required or not chosen:  # a required one sent back unchosen says so again
            spec.options.append(Option("", "(not set)" if not spec.required else "(choose)", not chosen))
        for value in values:
            text = _option_value(value)
            spec.options.append(Option(text, text, chosen == text))
        return spec

    def as_boolean(self, spec: FormField, schema: dict[str, Any]) -> FormField:
        spec.kind = "select"
        spec.enum = [True, False]
        sent, default, has_default = self.initial(spec, schema)
        chosen = sent if sent is not None else (_option_value(default) if has_default else "")
        spec.options = [
            Option("", "(not set)" if not spec.required else "(choose)", chosen == ""),
            Option("true", "true", chosen == "true"),
            Option("false", "false", chosen == "false"),
        ]
        return spec

    def as_number(self, spec: FormField, schema: dict[str, Any], kind: str) -> FormField:
        spec.kind = kind
        spec.input_type = "number"
        spec.bounds = _bounds(schema, {"minimum": "min", "maximum": "max"})
        sent, default, has_default = self.initial(spec, schema)
        spec.value = sent if sent is not None else (_option_value(default) if has_default else "")
        return spec

    def as_string(self, spec: FormField, schema: dict[str, Any]) -> FormField:
        sent, default, has_default = self.initial(spec, schema)
        spec.value = (
            sent if sent is not None else (str(default) if has_default and default is not None else "")
        )
        fmt = schema.get("format")
        max_length = schema.get("maxLength")
        long_name = bool(_LONG_TEXT.search(spec.key.lower())) and not spec.is_item
        if "\n" in spec.value or (
            fmt is None and (not isinstance(max_length, int) or max_length > 200) and long_name
        ):
            spec.kind = "textarea"
        else:
            spec.kind = "text"
        if spec.kind == "text" or spec.kind == "textarea":
            spec.bounds = _bounds(schema, {"minLength": "minlength", "maxLength": "maxlength"})
        if spec.kind == "text":
            # Only formats whose browser widget sends exactly what the schema expects.
            spec.input_type = {"email": "email", "date": "date"}.get(str(fmt), "text")
        return spec

    def as_object(
        self, spec: FormField, schema: dict[str, Any], depth: int, seen: tuple[str, ...]
    ) -> FormField:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or (not properties and depth > 0):
            return self.as_json(spec, schema)
        spec.kind = "object"
        listed = schema.get("required")
        required: list[Any] = listed if isinstance(listed, list) else []
        for key, sub in properties.items():
            child_name = f"{spec.name}.{_segment(str(key))}"
            child = self.build(sub, child_name, str(key), key in required, depth + 1, seen)
            spec.children.append(child)
        extra = schema.get("additionalProperties")
        if depth > 0 and extra not in (None, False) and extra != {"not": {}}:
            spec.hints = [*spec.hints, "more properties allowed (use raw JSON)"]
        return spec

    def as_array(
        self, spec: FormField, schema: dict[str, Any], depth: int, seen: tuple[str, ...]
    ) -> FormField:
        items = schema.get("items")
        item_schema, _seen, broken = self.resolve(items if isinstance(items, dict) else {}, seen)
        if broken or not isinstance(items, dict) or not _is_simple(item_schema):
            # Arrays of objects and the like: one JSON text is easier than nested slot lists.
            return self.as_json(spec, schema)
        spec.kind = "array"
        spec.item_schema = item_schema
        _sent, default, has_default = self.initial(spec, schema)
        indices = self.slot_indices(spec.name)
        if not indices:
            count = len(default) if has_default and isinstance(default, list) else 0
            indices = list(range(count + EXTRA_SLOTS))
        else:
            indices = [*indices, max(indices) + 1]
        max_items = schema.get("maxItems")
        if isinstance(max_items, int):
            indices = indices[: max(max_items, 1)]
        for index in indices:
            item_default = dict(item_schema)
            item_default.pop("default", None)
            if self.data is None and has_default and isinstance(default, list) and index < len(default):
                item_default["default"] = default[index]
            spec.children.append(
                self.build_item(item_default, f"{spec.name}.{index}", spec.key, index, depth, seen)
            )
        return spec

    def build_item(
        self, schema: dict[str, Any], name: str, label: str, index: int, depth: int, seen: tuple[str, ...]
    ) -> FormField:
        spec = self.build(schema, name, "", False, depth + 1, seen)
        spec.key = spec.label = f"{label} [{index + 1}]"
        spec.is_item = True
        return spec

    def slot_indices(self, name: str) -> list[int]:
        if self.data is None:
            return []
        pattern = re.compile(re.escape(name) + r"\.(\d+)$")
        found = {int(m.group(1)) for key in self.data if (m := pattern.match(str(key)))}
        return sorted(found)

    def as_choice(
        self, spec: FormField, variants: list[Any], depth: int, seen: tuple[str, ...], how: str
    ) -> FormField:
        spec.kind = "choice"
        chosen = self.submitted(spec.variant_name)
        spec.null_checked = spec.nullable and self.submitted(spec.null_name) is not None
        if chosen is None:
            chosen = "" if not spec.required else "0"
        if not spec.required:
            spec.options.append(Option("", "(not set)", chosen == ""))
        for index, variant in enumerate(variants):
            resolved, _s, _b = self.resolve(variant, seen)
            label = _variant_label(resolved, index)
            spec.options.append(Option(str(index), label, chosen == str(index)))
            child = self.build(variant, f"{spec.name}.~{index}", label, False, depth + 1, seen)
            child.label = label
            child.variant, child.hidden = str(index), chosen != str(index)
            spec.children.append(child)
        spec.hints = [*spec.hints, f"{how}: pick a variant"]
        return spec


def _pointer(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return None
    target: Any = root
    for raw in ref[1:].split("/"):
        if raw == "":
            continue
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def _merge_all_of(schema: dict[str, Any], builder: _Builder, seen: tuple[str, ...]) -> dict[str, Any] | None:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties: dict[str, Any] = dict(merged.get("properties") or {})
    required: list[Any] = list(merged.get("required") or [])
    for part in schema["allOf"]:
        resolved, _s, broken = builder.resolve(part, seen)
        if broken or not isinstance(resolved, dict):
            return None
        properties.update(resolved.get("properties") or {})
        required.extend(resolved.get("required") or [])
        for k, v in resolved.items():
            if k not in ("properties", "required"):
                merged.setdefault(k, v)
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return []


def _guess_type(schema: dict[str, Any]) -> str:
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return ""


def _is_null_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("type") == "null" or schema.get("const", 0) is None)


def _is_simple(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if "enum" in schema or "const" in schema:
        return True
    non_null = [t for t in _types(schema) if t != "null"]
    return len(non_null) == 1 and non_null[0] in _SCALARS and not (schema.get("anyOf") or schema.get("oneOf"))


def _variant_label(schema: Any, index: int) -> str:
    if isinstance(schema, dict):
        title = schema.get("title")
        if isinstance(title, str) and title:
            return title
        if "const" in schema:
            return f"const {json.dumps(schema['const'])}"
        types = _types(schema) or [_guess_type(schema) or "any"]
        return f"{index + 1}: {' | '.join(types)}"
    return f"{index + 1}"


def _option_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _hints(schema: dict[str, Any]) -> list[str]:
    hints = []
    for key, label in (
        ("format", "format"),
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("pattern", "pattern"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
    ):
        value = schema.get(key)
        if value is not None and not isinstance(value, (dict, list)) and not isinstance(value, bool):
            hints.append(f"{label} {value}")
    header = schema.get("x-mcp-header")
    if isinstance(header, str) and header:
        # 2026-07-28 over HTTP: the value also travels in this header, for gateways to route on.
        hints.append(f"sent as header Mcp-Param-{header}")
    return hints


def build_form(
    schema: Any, data: Mapping[str, Any] | None = None, errors: Mapping[str, str] | None = None
) -> FormField:
    """Return the form's root field for a tool's inputSchema, pre-filled with defaults or with ``data``."""
    builder = _Builder(schema, data, errors or {})
    root_schema = schema if isinstance(schema, dict) else {}
    if "properties" not in root_schema and "$ref" not in root_schema and "allOf" not in root_schema:
        root_schema = {**root_schema, "type": "object", "properties": {}}
    root = builder.build(root_schema, PREFIX, "", True, 0, ())
    if root.kind != "object":
        # A root that is not a plain object (oneOf at the top, a cycle...): raw JSON only.
        root.kind = "object"
        root.children = []
        root.hints = ["this input schema cannot be shown as a form: use raw JSON"]
    root.error = (errors or {}).get(PREFIX, "")
    for child in root.children:
        _enforce(child)
    return root


def _enforce(spec: FormField) -> None:
    """Mark the fields the browser asks for before sending (``FormField.enforced``)."""
    if not spec.required or spec.nullable or spec.is_item:
        return
    spec.enforced = spec.kind not in ("object", "array", "choice")
    if spec.kind == "object":
        for child in spec.children:
            _enforce(child)


def _bounds(schema: dict[str, Any], attributes: dict[str, str]) -> dict[str, str]:
    """The schema's numeric limits as input attributes; what is not a number is left to the server."""
    return {
        attribute: str(schema[keyword])
        for keyword, attribute in attributes.items()
        if isinstance(schema.get(keyword), int | float) and not isinstance(schema.get(keyword), bool)
    }


def default_arguments(schema: Any) -> dict[str, Any]:
    """Return the arguments the form starts with (its defaults), for the raw JSON editor."""
    arguments, _errors = parse_submission(schema, _defaults_as_data(build_form(schema)), check_required=False)
    return arguments


def _defaults_as_data(root: FormField) -> dict[str, str]:
    data: dict[str, str] = {}

    def walk(spec: FormField) -> None:
        if spec.kind in ("object", "array"):
            for child in spec.children:
                walk(child)
        elif spec.kind == "choice":
            return
        else:
            data[spec.name] = (
                spec.value
                if spec.kind != "select"
                else next((o.value for o in spec.options if o.selected), "")
            )

    walk(root)
    return data


_ABSENT = object()


class _Parser:
    def __init__(self, data: Mapping[str, Any], check_required: bool) -> None:
        self.data = data
        self.errors: dict[str, str] = {}
        self.check_required = check_required

    def text(self, name: str) -> str:
        value = self.data.get(name)
        return "" if value is None else str(value)

    def missing(self, spec: FormField) -> Any:
        if spec.required and self.check_required:
            self.errors[spec.name] = "required"
        return _ABSENT

    def value(self, spec: FormField) -> Any:
        if spec.nullable and self.data.get(spec.null_name) is not None:
            return None
        if spec.kind == "object":
            if spec.name != PREFIX and not spec.required and not self.any_input(spec):
                # An optional object left blank is left out, without asking for its required keys.
                return _ABSENT
            result: dict[str, Any] = {}
            for child in spec.children:
                got = self.value(child)
                if got is not _ABSENT:
                    result[child.key] = got
            if not result and spec.name != PREFIX and not spec.required:
                return _ABSENT
            return result
        if spec.kind == "array":
            items = [v for c in spec.children if (v := self.value(c)) is not _ABSENT]
            return items if items else self.missing(spec)
        if spec.kind == "choice":
            chosen = self.text(spec.variant_name)
            if chosen == "" or not chosen.isdigit() or int(chosen) >= len(spec.children):
                return self.missing(spec)
            variant = spec.children[int(chosen)]
            variant.required = True
            got = self.value(variant)
            if got is _ABSENT and variant.name in self.errors:
                self.errors[spec.name] = self.errors.pop(variant.name)
            return got
        raw = self.text(spec.name)
        if spec.kind == "select":
            if raw == "":
                return self.missing(spec)
            for candidate in spec.enum:
                if _option_value(candidate) == raw:
                    return candidate
            self.errors[spec.name] = f"{raw!r} is not one of the choices"
            return _ABSENT
        if spec.kind in ("text", "textarea"):
            if raw == "":
                return self.missing(spec)
            # Browsers send textarea line breaks as CRLF; the person typed LF.
            return raw.replace("\r\n", "\n") if spec.kind == "textarea" else raw
        if spec.kind in ("integer", "number"):
            if raw.strip() == "":
                return self.missing(spec)
            return self.number(spec, raw.strip())
        if raw.strip() == "":
            return self.missing(spec)
        try:
            return parse_json(raw)
        except ValueError as exc:
            self.errors[spec.name] = f"not valid JSON: {exc}"
            return _ABSENT

    def any_input(self, spec: FormField) -> bool:
        if spec.nullable and self.data.get(spec.null_name) is not None:
            return True
        if spec.kind in ("object", "array"):
            return any(self.any_input(child) for child in spec.children)
        if spec.kind == "choice":
            return self.text(spec.variant_name) != ""
        return self.text(spec.name).strip() != ""

    def number(self, spec: FormField, raw: str) -> Any:
        try:
            number = float(raw)
        except ValueError:
            self.errors[spec.name] = f"{raw!r} is not a number"
            return _ABSENT
        if number != number or number in (float("inf"), float("-inf")):
            self.errors[spec.name] = f"{raw!r} is not a finite number"
            return _ABSENT
        if spec.kind == "integer":
            if not number.is_integer():
                self.errors[spec.name] = f"{raw!r} is not an integer"
                return _ABSENT
            return int(raw) if re.fullmatch(r"[+-]?\d+", raw) else int(number)
        if re.fullmatch(r"[+-]?\d+", raw):
            return int(raw)
        return number


def parse_submission(
    schema: Any, post_data: Mapping[str, Any], *, check_required: bool = True
) -> tuple[dict[str, Any], dict[str, str]]:
    """Turn a submitted form back into tool arguments with JSON types, and per-field errors by name."""
    root = build_form(schema, data=post_data)
    parser = _Parser(post_data, check_required)
    arguments = parser.value(root)
    if not isinstance(arguments, dict):
        arguments = {}
    return arguments, parser.errors
