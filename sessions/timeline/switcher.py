"""The session switcher's list: a team's live sessions and its most recent others, each with its state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sessions.models import McpSession

__all__ = ["SHOWN", "SwitcherEntry", "switcher_entries"]

SHOWN = 20  # live sessions first, then the newest ended ones, this many in all
FIELDS = ("public_id", "name", "status", "created", "last_seq", "recording_sha256")


@dataclass(frozen=True)
class SwitcherEntry:
    public_id: UUID
    name: str
    state: str  # live, ended, lost, failed, recording
    status: str  # the session's own status (ready, expired, closed, …)
    created: datetime
    frames: int
    current: bool


def _state(session: McpSession) -> str:
    if session.recording_sha256 or session.status == McpSession.Status.IMPORTING:
        return "recording"
    if session.status in McpSession.LIVE:
        return "live"
    if session.status in (McpSession.Status.LOST, McpSession.Status.FAILED):
        return str(session.status)
    return "ended"


def switcher_entries(team_id: int, current: UUID | None = None, shown: int = SHOWN) -> list[SwitcherEntry]:
    """The team's live sessions (newest first), then its newest others: ``shown`` at most."""
    team = McpSession.objects.filter(team_id=team_id).only(*FIELDS)
    live = list(team.filter(status__in=McpSession.LIVE).order_by("-created")[:shown])
    rest = list(team.exclude(status__in=McpSession.LIVE).order_by("-created")[: shown - len(live)])
    return [
        SwitcherEntry(
            s.public_id, s.name, _state(s), str(s.status), s.created, s.last_seq, s.public_id == current
        )
        for s in live + rest
    ]
