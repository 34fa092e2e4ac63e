"""The lifecycle bar: a session's phases as segments of time, each connection (a reconnect) its own run.

The timeline's state frames are the record: the session row's ``phases`` list is written by tasks
that a closing owner may cancel, so it can miss the end of a connection (``closed``) or a start-up
that failed at once; but it is written with the status, before the recorder stores the phase's frame.
``lifecycle`` takes both (one query, of state frames only, which an index of their own finds);
``segments`` is pure, over those phases and the session's status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions.models import McpSession, TimelineFrame

__all__ = ["Lifecycle", "Phase", "Segment", "lifecycle", "segments"]

MAX_PHASES = 2000
TERMINAL = frozenset({"closed", "failed", "lost"})
STARTS = frozenset({"starting", "connecting"})  # a connection's first phase: after an end, a new run
MARKER_PCT = 0.6  # how wide an instant (a terminal phase at the end) is drawn, in % of the bar


@dataclass(frozen=True)
class Phase:
    """A phase as recorded: when, which state, the engine's note, its frame."""

    wall: float
    state: str
    note: str = ""
    seq: int | None = None


@dataclass
class Segment:
    """A phase drawn on the bar: its span in seconds from the bar's start and in % of the bar."""

    state: str
    note: str
    start: float
    end: float
    run: int
    seq: int | None = None
    ongoing: bool = False  # the phase the session is in now (its end is "now")
    inferred: bool = False  # not recorded as a frame: told by the session's status
    x: float = 0.0
    width: float = 0.0

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1000


@dataclass
class Lifecycle:
    segments: list[Segment]
    runs: int
    start: float  # wall-clock seconds of the bar's left edge
    total_ms: float


def _runs(phases: list[Phase]) -> list[tuple[Phase, int]]:
    """Phases numbered by connection; a repeat of a state and what follows a failure in its run dropped."""
    kept: list[tuple[Phase, int]] = []
    run, failed = 0, False
    for phase in phases:
        previous = kept[-1][0].state if kept else ""
        if phase.state in STARTS and previous and previous != "starting" and previous not in STARTS:
            run, failed = run + 1, False
        elif failed and phase.state in ("closing", "closed"):
            continue  # closing a client that never opened: the failure is the end of this run
        if phase.state == previous and kept and kept[-1][1] == run:
            continue
        kept.append((phase, run))
        failed = failed or phase.state == "failed"
    return kept


def segments(
    phases: list[Phase], status: str, status_note: str, created: float, ended: float | None, now: float
) -> Lifecycle:
    """The bar of a session whose phase frames are ``phases``, now in ``status``."""
    live = status in McpSession.LIVE
    numbered = _runs(sorted(phases, key=lambda p: (p.wall, p.seq or 0)))
    if not numbered:  # nothing recorded yet, or a start-up that failed before any frame
        numbered = [(Phase(created, "starting", "waiting for the session to start"), 0)]
    out: list[Segment] = []
    for i, (phase, run) in enumerate(numbered):
        following = numbered[i + 1] if i + 1 < len(numbered) else None
        if following is not None and following[1] != run and phase.state not in TERMINAL:
            # A reconnect after a connection whose end was not recorded.
            out.append(Segment(phase.state, phase.note, phase.wall, following[0].wall, run, phase.seq))
            closed = Segment("closed", "its end was not recorded", following[0].wall, following[0].wall, run)
            closed.inferred = True
            out.append(closed)
            continue
        end = following[0].wall if following is not None else None
        out.append(
            Segment(phase.state, phase.note, phase.wall, phase.wall if end is None else end, run, phase.seq)
        )
    last = out[-1]
    stop = ended if ended is not None else last.start  # an ended session that did not note when
    if live:
        last.end, last.ongoing = max(last.start, now), True
    elif last.state not in TERMINAL or (status in TERMINAL and last.state != status):
        # Ended without its last phase recorded (a start-up that failed at once, a lost worker).
        if last.state not in TERMINAL:
            last.end = max(last.start, stop)
        final = Segment(status or "closed", status_note, last.end, last.end, last.run, inferred=True)
        out.append(final)
    start, finish = out[0].start, max(s.end for s in out)
    total = finish - start
    for segment in out:
        if total > 0:
            segment.x = (segment.start - start) / total * 100
            segment.width = (segment.end - segment.start) / total * 100
        else:
            segment.x, segment.width = 0.0, 100.0 / len(out)
    # An instant at the very end is drawn as a marker, inside the bar.
    for segment in out:
        if segment.width < MARKER_PCT:
            segment.x = min(segment.x, 100 - MARKER_PCT)
            segment.width = MARKER_PCT
    return Lifecycle(out, out[-1].run + 1, start, total * 1000)


def lifecycle(session: McpSession, now: float) -> Lifecycle:
    """The session's lifecycle bar, from its phase frames (one query)."""
    found = (
        TimelineFrame.objects.filter(
            session=session, kind="state", transport__state__in=list(McpSession.PHASES)
        )
        .order_by("seq")
        .values_list("seq", "wall", "transport", "note")[:MAX_PHASES]
    )
    phases = {
        seq: Phase(wall, str(_state(transport)), note or "", seq)
        for seq, wall, transport, note in found
        if _state(transport) in McpSession.PHASES
    }
    # The session's own list is written with its status, maybe before the recorder has stored the
    # phase's frame: whichever has a phase first, it shows.
    for noted in session.phases if isinstance(session.phases, list) else ():
        if isinstance(noted, dict) and isinstance(noted.get("wall"), int | float):
            seq = noted.get("seq") if isinstance(noted.get("seq"), int) else None
            if seq is None or seq not in phases:
                phase = Phase(
                    float(noted["wall"]), str(noted.get("state", "")), str(noted.get("note", "")), seq
                )
                phases[seq if seq is not None else -len(phases) - 1] = phase
    ended = session.ended.timestamp() if session.ended else None
    known = [p for p in phases.values() if p.state in McpSession.PHASES]
    return segments(known, session.status, session.status_note, session.created.timestamp(), ended, now)


def _state(transport: Any) -> Any:
    return transport.get("state") if isinstance(transport, dict) else None
