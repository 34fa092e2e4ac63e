"""Working on a session together: who is watching it now, who did what, and notes pinned to frames.

**Presence.** Every open tab's consumer announces itself to the session's channel-layer group
(``Presence`` events: ``join``, then a ``beat`` every ``INSPECTOR_PRESENCE_HEARTBEAT`` seconds,
``leave`` when it closes) and answers a newcomer's ``join`` with ``here`` on the newcomer's own
channel. Each consumer keeps its own ``Roster`` of the tabs it heard from; a tab not heard from for
three beats is dropped, so the tabs of a web process that dies (and never says ``leave``) drop out
of everyone's list. Nothing is stored: the group, on Redis in the hosted set-up, spans every web process.

**Activity.** ``teams.Activity`` rows: the views record what they do on a person's behalf (connect,
reconnect, disconnect, answer a review card, pin a note); the session's owner records the requests
and panel actions it sends for a person (their id comes with the command). Each new row is announced
with an ``ActivityAdded`` event, so open tabs append it to the Activity tab.

**Notes.** ``teams.Note``: pinned to a frame by its sequence number; a reply joins its thread (the
thread's first note). Any member may read them; writing needs an operator, as acting on the session does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from sessions.models import McpSession, TimelineFrame
from sessions.runtime import messages as m
from sessions.teams import access
from sessions.teams.models import Activity, Note, Role
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import BadParameter, int_param, owned_session

__all__ = [
    "MAX_NOTE",
    "Roster",
    "activity_context",
    "activity_entry",
    "entry_of",
    "add_note",
    "frame_context",
    "note_update",
    "record",
    "threads",
]

BEATS_MISSED = 3
"""A tab not heard from for this many heartbeats is gone (its web process died without a ``leave``)."""
MAX_NOTE = 10_000
ACTIVITY_SHOWN = 500


# --- presence ----------------------------------------------------------------------------------


@dataclass
class _Tab:
    user_id: int
    name: str
    seen: float


def _expiry() -> float:
    return BEATS_MISSED * settings.INSPECTOR_PRESENCE_HEARTBEAT


@dataclass
class Roster:
    """The tabs watching a session, as one consumer heard of them; people are counted once."""

    expiry: float = field(default_factory=_expiry)
    """Seconds after which a tab not heard from is dropped."""
    tabs: dict[str, _Tab] = field(default_factory=dict)

    def people(self) -> list[tuple[int, str]]:
        """Who is watching: each person once, by name."""
        unique = {tab.user_id: tab.name for tab in self.tabs.values()}
        return sorted(unique.items(), key=lambda item: (item[1].lower(), item[0]))

    def heard(self, event: m.Presence, now: float | None = None) -> bool:
        """Take a presence event in; whether the people watching changed."""
        before = self.people()
        if event.kind == "leave":
            self.tabs.pop(event.channel, None)
        else:
            self.tabs[event.channel] = _Tab(
                event.user_id, event.name, time.monotonic() if now is None else now
            )
        return self.people() != before

    def prune(self, now: float | None = None) -> bool:
        """Drop the tabs not heard from for ``expiry`` seconds; whether the people watching changed."""
        now = time.monotonic() if now is None else now
        before = self.people()
        for channel, tab in list(self.tabs.items()):
            if now - tab.seen > self.expiry:
                del self.tabs[channel]
        return self.people() != before


# --- activity --------------------------------------------------------------------------------------


async def record(
    session: McpSession, user_id: int | None, action: str, detail: str = "", frame_seq: int | None = None
) -> None:
    """Note who did what in the session, and tell its open tabs."""
    row = await Activity.objects.acreate(
        session=session, user_id=user_id, action=action, detail=detail[:500], frame_seq=frame_seq
    )
    await get_channel_layer().group_send(session.group_name, m.encode_event(m.ActivityAdded(row.pk)))


def activity_context(session: McpSession, request: Any, fresh: dict[str, Any]) -> dict[str, Any]:
    """The Activity tab: the newest entries, oldest first (newest last)."""
    newest = Activity.objects.filter(session=session).select_related("user").order_by("-at", "-pk")
    entries = list(newest[:ACTIVITY_SHOWN])
    entries.reverse()
    return {"entries": entries, "more": len(entries) == ACTIVITY_SHOWN}


def activity_entry(session: McpSession, activity_id: int) -> Activity | None:
    """One entry of the session's activity, with its person loaded (for a live tab)."""
    return Activity.objects.filter(session=session, pk=activity_id).select_related("user").first()


def entry_of(fields: dict[str, Any]) -> Activity:
    """An entry of the session's activity from the fields its writer sent (``store.record_activity``),
    as ``activity_entry`` reads it: only to be shown, never saved."""
    user = get_user_model()(username=fields["user"]) if fields.get("user") else None
    return Activity(
        pk=fields["id"],
        user=user,
        action=fields["action"],
        detail=fields["detail"],
        frame_seq=fields["frame_seq"],
        at=datetime.fromisoformat(fields["at"]),
    )


# --- notes -----------------------------------------------------------------------------------------


def threads(session: McpSession, seq: int) -> list[dict[str, Any]]:
    """The notes on one frame: each thread's first note and its replies, oldest first."""
    notes = list(Note.objects.filter(session=session, frame_seq=seq).select_related("author"))
    replies: dict[int, list[Note]] = {}
    for note in notes:
        if note.reply_to_id is not None:
            replies.setdefault(note.reply_to_id, []).append(note)
    return [{"note": n, "replies": replies.get(n.pk, [])} for n in notes if n.reply_to_id is None]


def note_counts(session: McpSession, seqs: list[int]) -> dict[int, int]:
    """How many notes each of these frames has (frames with none are left out)."""
    counted = (
        Note.objects.filter(session=session, frame_seq__in=seqs)
        .values("frame_seq")
        .annotate(n=Count("pk"))
        .values_list("frame_seq", "n")
    )
    return dict(counted)


def _sent_by(session: McpSession, seq: int) -> Activity | None:
    return (
        Activity.objects.filter(session=session, frame_seq=seq, action="sent").select_related("user").first()
    )


def frame_context(session: McpSession, seq: int, user_id: int) -> dict[str, Any]:
    """What the frame detail shows of working together: who sent it, its notes, whether one may add."""
    role = access.role_in(user_id, session.team_id)
    return {
        "sent_by": _sent_by(session, seq),
        "threads": threads(session, seq),
        "can_note": Role.allows(role, Role.OPERATOR),
        "note_seq": seq,
    }


def note_update(session: McpSession, note_id: int, user_id: int) -> dict[str, Any] | None:
    """What a tab redraws when a note is added: the frame's threads and its marker's count."""
    seq = Note.objects.filter(session=session, pk=note_id).values_list("frame_seq", flat=True).first()
    if seq is None:
        return None
    context = frame_context(session, seq, user_id)
    context.update(session=session, count=note_counts(session, [seq]).get(seq, 0), oob=True)
    return context


def _save_note(
    session: McpSession, user_id: int, seq: int, text: str, reply_to: int | None
) -> tuple[Note | None, str]:
    """Pin a note (or a reply); the note, or why not."""
    if not TimelineFrame.objects.filter(session=session, seq=seq).exists():
        return None, f"There is no frame {seq} in this session."
    thread = None
    if reply_to is not None:
        parent = Note.objects.filter(session=session, pk=reply_to, frame_seq=seq).first()
        if parent is None:
            return None, "The note you reply to is not on this frame."
        # A reply to a reply joins the same thread: threads are one level deep.
        thread = parent.reply_to_id or parent.pk
    note = Note.objects.create(
        session=session, frame_seq=seq, author_id=user_id, text=text, reply_to_id=thread
    )
    return note, ""


@require_POST
async def add_note(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Pin a note to a frame, or reply to one; answer with the frame's notes again (the form emptied)."""
    session = await owned_session(request, public_id)
    user = await signed_in_user(request)
    seq = int_param(request.POST, "frame", minimum=1)
    if seq is None:
        raise BadParameter("frame is required: the frame the note is pinned to")
    reply_to = int_param(request.POST, "reply_to", minimum=1)
    text = request.POST.get("text", "").replace("\r\n", "\n").strip()
    problem = ""
    if not text:
        problem = "Write something first."
    elif len(text) > MAX_NOTE:
        problem = f"A note is at most {MAX_NOTE} characters; this one has {len(text)}."
    note = None
    if not problem:
        note, problem = await sync_to_async(_save_note)(session, user.pk, seq, text, reply_to)
    if note is not None:
        action = "replied" if note.reply_to_id else "noted"
        await record(session, user.pk, action, text[:200], note.frame_seq)
        await get_channel_layer().group_send(session.group_name, m.encode_event(m.NoteAdded(note.pk)))
    context = await sync_to_async(frame_context)(session, seq, user.pk)
    kept = {"text": text, "reply_to": reply_to} if problem else {}
    context.update(session=session, problem=problem, kept=kept)
    status = 422 if problem else 200
    return await sync_to_async(render)(request, "sessions/notes/_notes.html", context, status=status)
