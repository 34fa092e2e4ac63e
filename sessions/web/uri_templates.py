"""RFC 6570 URI templates (levels 1-3; prefixes and explode of string values too), for resource templates."""

from __future__ import annotations

import re
from urllib.parse import quote

__all__ = ["expand_uri_template", "template_variables"]


_EXPRESSION = re.compile(r"\{([^{}]*)\}")
# operator: (first, separator, named, if-empty, allow reserved)
_OPERATORS: dict[str, tuple[str, str, bool, str, bool]] = {
    "": ("", ",", False, "", False),
    "+": ("", ",", False, "", True),
    "#": ("#", ",", False, "", True),
    ".": (".", ".", False, "", False),
    "/": ("/", "/", False, "", False),
    ";": (";", ";", True, "", False),
    "?": ("?", "&", True, "=", False),
    "&": ("&", "&", True, "=", False),
}
_RESERVED = ":/?#[]@!$&'()*+,;="
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")


def _varspecs(expression: str) -> tuple[str, list[tuple[str, int | None]]]:
    operator = expression[0] if expression and expression[0] in "+#./;?&" else ""
    specs: list[tuple[str, int | None]] = []
    for spec in expression[len(operator) :].split(","):
        spec = spec.strip().rstrip("*")
        name, _, prefix = spec.partition(":")
        if name:
            specs.append((name, int(prefix) if prefix.isdigit() else None))
    return operator, specs


def template_variables(template: str) -> list[str]:
    """Return the variable names of a URI template, each once, in order."""
    names: list[str] = []
    for expression in _EXPRESSION.findall(template):
        for name, _ in _varspecs(expression)[1]:
            if name not in names:
                names.append(name)
    return names


def _encode(value: str, allow_reserved: bool) -> str:
    if not allow_reserved:
        return quote(value, safe="")
    # Reserved characters and existing %XX triplets pass; a lone % is encoded.
    parts, last = [], 0
    for match in _PCT.finditer(value):
        parts.append(quote(value[last : match.start()], safe=_RESERVED))
        parts.append(match.group())
        last = match.end()
    parts.append(quote(value[last:], safe=_RESERVED))
    return "".join(parts)


def expand_uri_template(template: str, values: dict[str, str | None]) -> str:
    """Expand an RFC 6570 template with string values; missing or None values are undefined."""

    def expand(match: re.Match[str]) -> str:
        operator, specs = _varspecs(match.group(1))
        first, separator, named, if_empty, allow_reserved = _OPERATORS[operator]
        pieces = []
        for name, prefix in specs:
            value = values.get(name)
            if value is None:
                continue
            value = str(value)[:prefix] if prefix is not None else str(value)
            encoded = _encode(value, allow_reserved)
            if named:
                pieces.append(f"{name}={encoded}" if encoded else f"{name}{if_empty}")
            else:
                pieces.append(encoded)
        return first + separator.join(pieces) if pieces else ""

    return _EXPRESSION.sub(expand, template)
