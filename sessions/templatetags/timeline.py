"""The timeline's rows in a template: ``{% timeline_rows rows session t0 %}`` (sessions/web/rows.py)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from sessions.web.rows import timeline_rows as render_rows

register = template.Library()


@register.simple_tag
def timeline_rows(rows: Any, session: Any = None, t0: Any = None) -> SafeString:
    """The rows as the timeline shows them, their times counted from ``t0`` or the session's start."""
    return render_rows(rows, session, t0)
