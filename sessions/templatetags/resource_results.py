"""Template filters for resource contents: JSON text shown pretty."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def json_text(item: Any) -> str:
    """Return a resource's text re-indented when it is JSON (by type, or because it parses), else ""."""
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        return ""
    text = item["text"]
    mime = str(item.get("mimeType") or "").lower()
    looks_like_json = text.lstrip()[:1] in ("{", "[")
    if not (looks_like_json or mime == "application/json" or mime.endswith("+json")):
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    return json.dumps(value, indent=2, ensure_ascii=False)
