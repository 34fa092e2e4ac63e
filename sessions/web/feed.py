"""The live pipeline's rendering: what a stored batch of frames becomes for the tabs watching it.

A web process renders a batch once, however many tabs watch it: each row once, by the row template, so a
tab's filter picks among them by a cheap match; tabs that show the same thing are sent the very same
message, made once. Everything here is memoized per process by a key the caller names (``once``); the
consumers (``sessions/web/consumers.py``) decide what to ask for.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, TypeVar

from django.template import Context
from django.template.loader import get_template, render_to_string
from django.utils.safestring import SafeString

from sessions.timeline.queries import TimelineFilter

__all__ = ["Batch", "card_key", "keep", "kept", "once", "render_rows", "stats"]

T = TypeVar("T")

# How many answers a process keeps: a few per live session is all a tab that lags behind can ask for.
REMEMBERED = 512

_answers: OrderedDict[Hashable, asyncio.Future[Any]] = OrderedDict()
stats = {"batches": 0, "rows": 0}  # what this process rendered, for the tests that count it


async def once(key: Hashable, make: Callable[[], Awaitable[T]]) -> T:
    """``make()``'s answer, made once per key in this process; every later asker gets the same one.

    Askers that come while it is being made wait for it. A failure is not remembered: the next asker
    tries again.
    """
    found = _answers.get(key)
    if found is not None:
        _answers.move_to_end(key)
        return await asyncio.shield(found)
    future = _remember(key)
    try:
        future.set_result(await make())
    except BaseException as exc:
        _answers.pop(key, None)
        future.set_exception(exc)
        future.exception()  # retrieved: the askers waiting get it, nobody else needs to
        raise
    return future.result()


def keep(key: Hashable, value: Any) -> None:
    """Remember ``value`` as made for ``key`` (by a caller that had it in hand), unless it is already."""
    if key not in _answers:
        _remember(key).set_result(value)


def kept(key: Hashable) -> Any:
    """What was made for ``key`` already, or None (nothing waits for what is still being made; a
    failure is never kept)."""
    found = _answers.get(key)
    return found.result() if found is not None and found.done() else None


def _remember(key: Hashable) -> asyncio.Future[Any]:
    """A new answer's place, the oldest answers forgotten past ``REMEMBERED``."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    _answers[key] = future
    while len(_answers) > REMEMBERED:
        _answers.popitem(last=False)
    return future


def card_key(session: Any, rpc_id: Any, request_seq: Any) -> tuple[Any, ...]:
    """A finished call's card: the same for the tab that sent the request and every other tab."""
    return (session.group_name, "card", rpc_id, request_seq)


def render_rows(rows: Sequence[dict[str, Any]], start: Any) -> list[SafeString]:
    """Each row as the timeline shows it (``sessions/_timeline_row.html``), times counted from ``start``."""
    template = get_template("sessions/_timeline_row.html").template  # type: ignore[attr-defined]
    context = Context({"start": start})
    out = []
    for row in rows:
        with context.push(f=row):
            out.append(template.render(context))
    stats["rows"] += len(out)
    return out


class Batch:
    """A batch of rows, each rendered once when a tab first shows it, and the messages made of them, one
    per filter a tab applies."""

    def __init__(self, rows: list[dict[str, Any]], start: Any, count: int) -> None:
        self.rows = rows
        self.start = start
        self.count = render_to_string("sessions/_frame_count.html", {"count": count, "oob": True})
        self._html: dict[int, SafeString] = {}
        self._messages: dict[tuple[TimelineFilter, int], str] = {}

    def message(self, flt: TimelineFilter, after: int) -> str:
        """The rows after ``after`` that ``flt`` shows, appended to the timeline, and the frame count."""
        key = (flt, after)
        if key not in self._messages:
            picked = [i for i, r in enumerate(self.rows) if r["seq"] > after and flt.matches(r)]
            missing = [i for i in picked if i not in self._html]
            if missing:
                drawn = render_rows([self.rows[i] for i in missing], self.start)
                self._html.update(zip(missing, drawn, strict=True))
                stats["batches"] += 1
            rows = appended([self._html[i] for i in picked]) if picked else ""
            self._messages[key] = rows + self.count
        return self._messages[key]


def appended(html: Sequence[str]) -> str:
    """Rows put at the end of the timeline's table (the ``timeline`` htmx extension's swap)."""
    return render_to_string("sessions/_timeline_append.html", {"rendered": html})
