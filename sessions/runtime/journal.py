"""What a live session saves besides its frames, and the events that tell its viewers.

- **Lifecycle phases**: a ``state`` frame that is a step of the lifecycle is appended to the
  session's phases, with its status (and, at ``ready``, the negotiated facts) in the same write.
- **Reviews**: a request waiting for a person (sampling, elicitation, roots) is saved when it opens,
  and closed with who answered and how.
- **Activity** (``teams.Activity``): who did what.
- **The outbox**: events for the session's group, sent in order by one task.

While the process stops (the recorder held), the steps of the ending and the exit code are kept
and written with the session's end, in its one write: nobody watches, and a write each was a third
of the stop's database work with a thousand sessions. They were often not written at all before:
the task writing them was cancelled with the owner's others.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import BaseChannelLayer

from sessions.engine import ClientSession, Frame, PendingRequest, PendingResolved
from sessions.models import McpSession
from sessions.runtime import messages as m
from sessions.runtime import store

__all__ = ["FINAL_STATES", "Journal", "cancelling", "facts"]

FINAL_STATES = {"closed", "failed"}


def facts(client: ClientSession) -> dict[str, Any]:
    """What the handshake (or discovery) settled, as the session row keeps it."""
    return {
        "protocol_version": client.protocol_version or "",
        "mode": client.mode or "",
        "transport_name": client.transport.name,
        "server_info": client.server_info,
        "server_capabilities": client.server_capabilities,
        "client_capabilities": client.client_capabilities,
        "instructions": client.instructions or "",
    }


def cancelling() -> bool:
    """Whether the current task was asked to stop (a cancellation something below it swallowed)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class Journal:
    """A live session's writes besides its frames, each in a task of the owner's, and its outbox."""

    __slots__ = (
        "_answers", "_held_fields", "_held_phases", "_outbox", "_spawn",
        "layer", "owner_channel", "pk", "publish",
    )  # fmt: skip

    def __init__(
        self,
        session_pk: int,
        layer: BaseChannelLayer,
        spawn: Callable[[Awaitable[Any]], None],
    ) -> None:
        self.pk = session_pk
        self.layer = layer
        self._spawn = spawn
        """Runs a write in a task the owner ends with itself."""
        self.owner_channel = ""
        """The owner's channel, once it has one: the session's row is written only while it is its."""
        self._outbox: asyncio.Queue[m.Event] = asyncio.Queue()
        self.publish: Callable[[m.Event], None] = self._outbox.put_nowait
        """Queue an event for the session's viewers (sent in order by ``serve``)."""
        self._answers: dict[str, dict[str, Any]] = {}
        """Who answered each review, and how, until the engine says it is closed."""
        self._held_phases: list[dict[str, Any]] = []
        self._held_fields: dict[str, Any] = {}
        """Phases and fields seen while the process stops, written with the session's end, in one go."""

    # --- the outbox ---------------------------------------------------------------------------

    async def serve(self, group: str) -> None:
        """Send the queued events to the session's group, in order, until cancelled."""
        # Until cancelled, even if the channel layer swallows the cancellation mid-send (channels-redis
        # can): a task left "cancelling" but waiting on the queue would hold the stop for ever.
        while not cancelling():
            event = await self._outbox.get()
            with contextlib.suppress(Exception):
                await self.layer.group_send(group, m.encode_event(event))

    # --- the session's row and its phases --------------------------------------------------------

    def update(self, fields: dict[str, Any], *, held: bool = False) -> None:
        """Set fields of the session's row: now, or with its end while the process stops (``held``)."""
        if held:
            self._held_fields.update(fields)
        else:
            self._spawn(store.update_session(self.pk, owner_channel=self.owner_channel, **fields))

    def phase_seen(self, frame: Frame, seq: int, client: ClientSession | None, *, held: bool) -> None:
        """A state frame (``seq`` in the session) that is a step of the lifecycle goes into the phases."""
        state = frame.transport.get("state", "")
        if state not in McpSession.PHASES:
            return  # a note on the timeline, not a step of the lifecycle
        phase = {"state": state, "note": frame.note or "", "wall": frame.wall, "seq": seq}
        if held:
            self._held_phases.append(phase)
            return
        self._spawn(self._record_phase(state, phase, client))

    async def _record_phase(self, state: str, phase: dict[str, Any], client: ClientSession | None) -> None:
        fields: dict[str, Any] = {"status_note": phase["note"]}
        if state in McpSession.Status.values and state not in FINAL_STATES:
            fields["status"] = state
        if state == "ready" and client is not None:
            # With the negotiated facts, in the same write: whoever sees "ready" sees what was agreed.
            fields.update(facts(client))
        if await store.append_phases(self.pk, [phase], owner_channel=self.owner_channel, **fields):
            self.publish(m.StateChanged(fields.get("status", ""), phase["note"]))

    async def end(self, **fields: Any) -> bool:
        """Write the session's end (``fields``) with the phases and fields held while the process stopped;
        whether it did (not when the session is no longer this owner's: declared lost meanwhile)."""
        return await store.append_phases(
            self.pk, self._held_phases, owner_channel=self.owner_channel, **self._held_fields, **fields
        )

    # --- reviews and activity ----------------------------------------------------------------------

    def review_opened(self, pending: PendingRequest, base: int) -> None:
        self._spawn(self._review_opened(pending, base))

    async def _review_opened(self, pending: PendingRequest, base: int) -> None:
        await store.save_review(self.pk, pending, base)
        self.publish(m.ReviewChanged(pending.key))

    def answered(self, key: str, answer: dict[str, Any]) -> None:
        """Who answered the review ``key``, and how: saved when the engine closes it."""
        self._answers[key] = answer

    def review_closed(self, resolved: PendingResolved) -> None:
        self._spawn(self._review_closed(resolved))

    async def _review_closed(self, resolved: PendingResolved) -> None:
        await store.resolve_review(self.pk, resolved, self._answers.pop(resolved.key, None))
        self.publish(m.ReviewChanged(resolved.key))

    def activity(self, user_id: int, action: str, detail: str, seq: int | None = None) -> None:
        """Record who did what (``teams.Activity``) and tell the viewers."""
        self._spawn(self._activity(user_id, action, detail, seq))

    async def _activity(self, user_id: int, action: str, detail: str, seq: int | None) -> None:
        entry = await store.record_activity(self.pk, user_id, action, detail, seq)
        self.publish(m.ActivityAdded(entry["id"], entry))
