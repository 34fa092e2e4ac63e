"""Replay a recording against another build of a server and say what changed, semantically.

Pure Python, no I/O: the CLI (``mcp-inspector replay``) reads the file and runs the session; the web may
use the same pieces. ``Conversation.of(frames_of(lines))`` is what to send and what it got;
``Links`` carries what the conversation depends on (a cursor, a task id) over to the new server's
values; ``compare_answers`` and ``compare_latency`` say what changed, as ``Difference`` values.
"""

from __future__ import annotations

from sessions.replay._conversation import (
    ASKING_METHODS,
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
    masked,
)
from sessions.replay._paths import PathError, Pattern
from sessions.replay._report import StepReport, for_page, shown, summary

__all__ = [
    "ABSENT",
    "ASKING_METHODS",
    "LIST_KEYS",
    "Conversation",
    "Difference",
    "Links",
    "PathError",
    "Pattern",
    "RecordingProblem",
    "Step",
    "StepReport",
    "compare_answers",
    "compare_asked",
    "compare_latency",
    "for_page",
    "frames_of",
    "masked",
    "shown",
    "summary",
]
