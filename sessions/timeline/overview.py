"""What the Overview tab shows beyond the session's own fields: the lifecycle bar and the capability table."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sessions.models import McpSession
from sessions.timeline.capabilities import capability_rows, toggles_of, usage_counts
from sessions.timeline.lifecycle import lifecycle

__all__ = ["overview"]


def overview(
    session: McpSession,
    *,
    shown: McpSession | None = None,
    text: Callable[[str], str] = str,
    frames: Any = None,
) -> dict[str, Any]:
    """The lifecycle and capability rows of a session (two queries).

    For a share: ``shown``, the copy whose facts to show (redacted); ``text``, how a note is shown;
    ``frames``, the frames whose use of each capability is counted (its scope).
    """
    facts = shown if shown is not None else session
    bar = lifecycle(session, time.time())
    for segment in bar.segments:
        segment.note = text(segment.note)
    revision = facts.protocol_version or str(facts.config.get("protocol_version") or "")
    rows = capability_rows(
        revision,
        facts.client_capabilities,
        facts.server_capabilities,
        toggles_of(facts.config),
        usage_counts(session, frames),
    )
    return {
        "lifecycle": bar,
        "capability_rows": rows,
        "capability_mismatches": sum(len(r.mismatches) for r in rows),
        "capability_revision": revision,
    }
