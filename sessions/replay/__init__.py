"""Replay a recording against another build of a server and say what changed, semantically.

Pure Python, no I/O: the CLI (``mcp-inspector replay``) reads the file and runs the session; the web may
use the same pieces. ``Conversation.of(frames_of(lines))`` is what to send and what it got;
``Links`` carries what the conversation depends on (a cursor, a task id) over to the new server's
values; ``converse`` sends it through an engine session someone opened (the CLI's, a live session's
owner) and ``reports`` compares what came back; ``compare_answers`` and ``compare_latency`` say what
changed, as ``Difference`` values; a ``Baseline`` is what differs between two runs of the same build.
"""

from __future__ import annotations

from sessions.replay._baseline import Baseline
from sessions.replay._conversation import (
    ASKING_METHODS,
    COUNTED_NOTIFICATIONS,
    Conversation,
    Links,
    RecordingProblem,
    Step,
    frames_of,
)
from sessions.replay._diff import (
    ABSENT,
    LIST_KEYS,
    Difference,
    compare_answers,
    compare_asked,
    compare_latency,
    compare_notified,
    masked,
)
from sessions.replay._drive import (
    Asking,
    Handler,
    Outcome,
    Outcomes,
    answering,
    as_recorded,
    capabilities,
    client_info,
    converse,
    declared_note,
    reports,
)
from sessions.replay._pair import Side, paired
from sessions.replay._paths import PathError, Pattern
from sessions.replay._report import StepReport, for_page, shown, summary

__all__ = [
    "ABSENT",
    "ASKING_METHODS",
    "COUNTED_NOTIFICATIONS",
    "LIST_KEYS",
    "Asking",
    "Baseline",
    "Conversation",
    "Difference",
    "Handler",
    "Links",
    "Outcome",
    "Outcomes",
    "PathError",
    "Pattern",
    "RecordingProblem",
    "Side",
    "Step",
    "StepReport",
    "answering",
    "as_recorded",
    "capabilities",
    "client_info",
    "compare_answers",
    "compare_asked",
    "compare_latency",
    "compare_notified",
    "converse",
    "declared_note",
    "for_page",
    "frames_of",
    "masked",
    "paired",
    "reports",
    "shown",
    "summary",
]
