"""Template filters for showing what servers send: pretty JSON, safe data URLs, sizes of base64."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from django import template

from sessions.models import PendingReview
from sessions.web.elicitation_forms import fields_of
from sessions.web.labels import session_label
from sessions.web.llm import preferred
from sessions.web.reviews import card_template, http_url, url_elicitations, url_parts
from sessions.web.roots import roots_text

register = template.Library()

_MEDIA_TYPE = re.compile(r"^(image|audio)/[a-z0-9.+-]+$", re.IGNORECASE)
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")


@register.filter
def draft_model(params: Any, offered: list[dict[str, str]]) -> str:
    """The model a sampling card offers first to draft with: the request's hints' (sessions/web/llm.py)."""
    return preferred(params, offered)


@register.filter
def review_card(review: PendingReview) -> str:
    """The template of a waiting request's review card."""
    return card_template(review)


@register.filter
def suggested_roots(review: PendingReview) -> str:
    """The session's current roots, one "URI name" a line: where a roots/list answer starts."""
    return roots_text(review.current_roots())


@register.filter
def or_elicitation_fields(given: Any, review: PendingReview) -> Any:
    """The inputs already validated (``given``), else those of the elicitation, defaults filled in."""
    return given or fields_of(review.params.get("requestedSchema"))


@register.filter
def pretty_json(value: Any) -> str:
    """Indent any JSON value; the template escapes the result like any other text."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def data_url(block: dict[str, Any]) -> str:
    """Return a data: URL for an image or audio block, or "" when its type or data is not safe to use."""
    mime = str(block.get("mimeType", ""))
    data = block.get("data") or block.get("blob") or ""
    if not _MEDIA_TYPE.match(mime) or not isinstance(data, str) or not _BASE64.match(data):
        return ""
    return f"data:{mime.lower()};base64,{data.strip()}"


@register.filter
def base64_size(data: Any) -> int:
    """Return the decoded size of base64 data in bytes (0 when it is not base64)."""
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return 0


@register.filter
def get(mapping: Any, key: str) -> Any:
    """Look a key up in a dict (keys with dashes or slashes included)."""
    return mapping.get(key) if isinstance(mapping, dict) else None


register.filter(http_url)
register.filter(session_label)
register.filter(url_elicitations)
register.filter(url_parts)


@register.filter
def resource_params(uri: Any) -> str:
    """Return the params of a resources/read request for ``uri``, as JSON."""
    return json.dumps({"uri": str(uri)})


@register.filter
def as_list(value: Any) -> list[Any]:
    """Wrap a single content block in a list (prompt messages hold one block)."""
    return value if isinstance(value, list) else [value]


@register.filter
def parsed_json(value: Any) -> Any:
    """Return the JSON value a string holds, or None when it holds none (for "pretty or raw" views)."""
    if not isinstance(value, str) or not value.strip().startswith(("{", "[")):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None
