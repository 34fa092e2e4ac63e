"""The Conformance tab's plots, bucketed for server-rendered SVG: latency by method, latency over time,
frames per second.

The database does the counting, from indexes: answers by method and latency bucket (a latency's bucket
a ``CASE`` over the edges), then by time column and bucket; frames by bar of seconds. So a
100,000-frame session sends Python a few hundred rows, never a row a frame, and no query reads the
frames' rows themselves. The rest is pure: it folds those counts into histograms, a heatmap and rates
(``latency_over_time`` and ``frames_per_second`` from counts per second, ``heatmap`` and ``fps_bars``
from counts per column the database has binned).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    ExpressionWrapper,
    IntegerField,
    Max,
    Min,
    Q,
    Value,
    When,
)
from django.db.models.functions import Cast

from sessions.models import McpSession, TimelineFrame
from sessions.timeline.queries import union_all

__all__ = [
    "EDGES_MS",
    "Bar",
    "FpsBar",
    "HeatCell",
    "MethodLatency",
    "bin_width",
    "bucket_of",
    "fps_bars",
    "frames_per_second",
    "heatmap",
    "latency_by_method",
    "latency_over_time",
    "plots",
]

# Latency buckets, log-spaced: bucket 0 is under 0.1 ms, bucket i is [EDGES_MS[i-1], EDGES_MS[i]),
# the last is a minute or more.
EDGES_MS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 60_000)
BUCKETS = len(EDGES_MS) + 1
METHODS_SHOWN = 12
TIME_BINS = 60
FPS_BINS = 120


def bucket_of(latency_ms: float) -> int:
    """The latency bucket a value falls in."""
    return bisect.bisect_right(EDGES_MS, latency_ms)


def bucket_label(index: int) -> str:
    """What a bucket's lower edge reads as: 0, 100 µs, 2 ms, 1 s, 1 min."""
    if index == 0:
        return "0"
    edge = EDGES_MS[index - 1]
    if edge < 1:
        return f"{edge * 1000:g} µs"
    if edge < 1000:
        return f"{edge:g} ms"
    return f"{edge / 1000:g} s" if edge < 60_000 else "1 min"


# The axis under the latency plots: a label every decade (100 µs, 1 ms, … 10 s), blank between.
AXIS = [bucket_label(i) if i % 3 == 1 else "" for i in range(BUCKETS)]


@dataclass(frozen=True)
class Bar:
    """A bar of a histogram drawn in a 0..10 high box, its bucket's count and lower edge for a tooltip."""

    x: int
    y: float
    height: float
    count: int
    label: str


@dataclass
class MethodLatency:
    """One method's answers by latency bucket, with the buckets its p50 and p95 fall in."""

    method: str
    count: int
    buckets: list[int]
    p50_bucket: int = 0
    p95_bucket: int = 0
    bars: list[Bar] = field(default_factory=list)  # the non-empty buckets

    @property
    def p50(self) -> str:
        return bucket_range(self.p50_bucket)

    @property
    def p95(self) -> str:
        return bucket_range(self.p95_bucket)


def bucket_range(index: int) -> str:
    """A bucket by its upper bound, as a percentile that falls in it reads: "< 1 s", "≥ 1 min"."""
    if index >= BUCKETS - 1:
        return f"≥ {bucket_label(index)}"
    return f"< {bucket_label(index + 1)}"


def _rank_bucket(buckets: list[int], fraction: float) -> int:
    """The bucket holding the nearest-rank percentile of the counted values."""
    rank = max(1, math.ceil(fraction * sum(buckets)))
    seen = 0
    for index, n in enumerate(buckets):
        seen += n
        if seen >= rank:
            return index
    return BUCKETS - 1


def latency_by_method(
    counts: Iterable[tuple[str, int, int]], shown: int = METHODS_SHOWN
) -> list[MethodLatency]:
    """From (method, bucket, answers), per method (the most answered first, at most ``shown``)
    its latency histogram, and the buckets of its p50 and p95."""
    by_method: dict[str, list[int]] = {}
    for method, bucket, n in counts:
        buckets = by_method.setdefault(method or "?", [0] * BUCKETS)
        buckets[min(max(int(bucket), 0), BUCKETS - 1)] += n
    ordered = sorted(by_method.items(), key=lambda item: (-sum(item[1]), item[0]))[:shown]
    rows = []
    for method, buckets in ordered:
        row = MethodLatency(
            method, sum(buckets), buckets, _rank_bucket(buckets, 0.5), _rank_bucket(buckets, 0.95)
        )
        top = max(buckets)
        for i, n in enumerate(buckets):
            if n:
                # At least a sliver for one answer among thousands, so a rare slow call stays visible.
                height = max(0.8, 10 * n / top)
                row.bars.append(Bar(i, 10 - height, height, n, bucket_label(i)))
        rows.append(row)
    return rows


@dataclass
class HeatCell:
    """How many answers of one time bin fell in one latency bucket (y: 0 at the top)."""

    x: int
    y: int
    count: int
    opacity: float


@dataclass
class Heatmap:
    cells: list[HeatCell]
    start: float
    end: float
    bins: int
    most: int
    buckets: int = BUCKETS
    y_axis: list[str] = field(default_factory=lambda: AXIS[::-1])  # top to bottom

    @property
    def column_ms(self) -> float:
        return (self.end - self.start) / self.bins * 1000

    @property
    def span_ms(self) -> float:
        return (self.end - self.start) * 1000


def latency_over_time(counts: Iterable[tuple[int, int, int]], bins: int = TIME_BINS) -> Heatmap | None:
    """From (second, bucket, answers), a time × latency-bucket heatmap of at most ``bins`` columns
    of whole seconds; None without answers."""
    found = [
        (int(second), int(bucket), n) for second, bucket, n in counts if bucket is not None and bucket >= 0
    ]
    if not found:
        return None
    first = min(second for second, _, _ in found)
    last = max(second for second, _, _ in found)
    width = bin_width(first, last, bins)
    return heatmap((((second - first) // width, bucket, n) for second, bucket, n in found), first, last, bins)


def bin_width(first: int, last: int, bins: int) -> int:
    """How many whole seconds a column (or bar) spans, for at most ``bins`` of them from first to last."""
    return max(1, math.ceil((last - first + 1) / bins))


def heatmap(columns: Iterable[tuple[int, int, int]], first: int, last: int, bins: int) -> Heatmap | None:
    """From (column, bucket, answers), the columns ``bin_width(first, last, bins)`` seconds wide from
    ``first``: the heatmap ``latency_over_time`` draws (the database can count by column itself)."""
    cells: dict[tuple[int, int], int] = {}
    for x, bucket, n in columns:
        if bucket is None or bucket < 0:
            continue
        key = (int(x), min(int(bucket), BUCKETS - 1))
        cells[key] = cells.get(key, 0) + n
    if not cells:
        return None
    width = bin_width(first, last, bins)
    most = max(cells.values())
    drawn = [
        # Opacity on a log scale: one answer still shows next to a thousand.
        HeatCell(x, BUCKETS - 1 - b, n, 0.2 + 0.8 * math.log1p(n) / math.log1p(most))
        for (x, b), n in sorted(cells.items())
    ]
    columns_shown = math.ceil((last - first + 1) / width)
    return Heatmap(drawn, float(first), float(first + columns_shown * width), columns_shown, most)


@dataclass
class FpsBar:
    x: int
    rate: float  # frames a second, averaged over the bin
    height: float  # 0..100

    @property
    def y(self) -> float:
        return 100 - self.height


@dataclass
class FpsPlot:
    bars: list[FpsBar]
    start: float
    seconds: int  # how many seconds the plot spans
    bins: int
    peak: float
    total: int
    bin_seconds: int


def frames_per_second(per_second: Iterable[tuple[int, int]], bins: int = FPS_BINS) -> FpsPlot | None:
    """Frames counted per whole second, rebinned to at most ``bins`` bars of a whole number of seconds."""
    counts = sorted((int(second), int(n)) for second, n in per_second)
    if not counts:
        return None
    first, last = counts[0][0], counts[-1][0]
    width = bin_width(first, last, bins)
    return fps_bars((((second - first) // width, n) for second, n in counts), first, last, bins)


def fps_bars(per_bar: Iterable[tuple[int, int]], first: int, last: int, bins: int) -> FpsPlot:
    """From (bar, frames), the bars ``bin_width(first, last, bins)`` seconds wide from ``first``: what
    ``frames_per_second`` draws (the database can count by bar itself)."""
    seconds = last - first + 1
    bin_seconds = bin_width(first, last, bins)
    shown = math.ceil(seconds / bin_seconds)
    totals = [0] * shown
    for x, n in per_bar:
        totals[int(x)] += int(n)
    rates = [n / bin_seconds for n in totals]
    peak = max(rates)
    bars = [FpsBar(i, rate, 100 * rate / peak) for i, rate in enumerate(rates) if rate]
    return FpsPlot(bars, float(first), seconds, shown, peak, sum(totals), bin_seconds)


ANSWER = Q(direction="in", latency_ms__isnull=False)


def _bucket(low: int = 0, high: int = len(EDGES_MS)) -> Any:
    """The latency bucket of an answer, in SQL: a binary search over the edges (five comparisons,
    not up to nineteen), for buckets ``low`` to ``high``; only for answers (a latency to bucket)."""
    if low == high:
        return Value(low)
    middle = (low + high) // 2
    return Case(
        When(latency_ms__lt=EDGES_MS[middle], then=_bucket(low, middle)),
        default=_bucket(middle + 1, high),
        output_field=IntegerField(),
    )


def plots(session: McpSession, frames: Any = None) -> dict[str, Any]:
    """Everything the Conformance tab plots, counted by the database from its indexes, a few hundred
    rows back and never a row a frame.

    The answers (``frame_answer``): their first and last second, then one count by time column,
    latency bucket and method. Every frame (``frame_wall``): a count of each bar's span of wall time,
    one range of the index each, so the count needs no sorting. A second is a whole second of wall
    time; on PostgreSQL the answers' cast rounds rather than truncates: an answer may count in the
    next second, which these plots do not mind.
    """
    found = (TimelineFrame.objects.filter(session=session) if frames is None else frames).order_by()
    return {
        **_latency_plots(found.filter(ANSWER)),
        "fps": _fps(found),
        "latency_axis": AXIS,
        "latency_buckets": BUCKETS,
    }


def _latency_plots(answers: Any) -> dict[str, Any]:
    """The latency histograms by method and the heatmap over time, from one grouped count."""
    second = Cast("wall", BigIntegerField())
    span = answers.aggregate(first=Min(second), last=Max(second))
    if span["first"] is None:
        return {"latency_methods": latency_by_method(()), "latency_heatmap": None}
    first, last = int(span["first"]), int(span["last"])
    width = bin_width(first, last, TIME_BINS)
    column = ExpressionWrapper((second - Value(first)) / Value(width), output_field=BigIntegerField())
    counts = list(
        answers.annotate(x=column, bucket=_bucket())
        .values_list("x", "bucket", "method")
        .annotate(n=Count("pk"))
    )
    per_method: dict[tuple[str, int], int] = {}
    per_cell: dict[tuple[int, int], int] = {}
    for x, bucket, method, n in counts:
        per_method[method, bucket] = per_method.get((method, bucket), 0) + n
        per_cell[x, bucket] = per_cell.get((x, bucket), 0) + n
    return {
        "latency_methods": latency_by_method((m, b, n) for (m, b), n in per_method.items()),
        "latency_heatmap": heatmap(((x, b, n) for (x, b), n in per_cell.items()), first, last, TIME_BINS),
    }


def _fps(found: Any) -> FpsPlot | None:
    """Frames per second: each bar's frames counted over its own range of the ``frame_wall`` index,
    all the bars in one statement (``UNION ALL``), so nothing is sorted or grouped row by row."""
    walls = found.values_list("wall", flat=True)
    earliest = walls.order_by("wall").first()
    if earliest is None:
        return None
    first, last = math.floor(earliest), math.floor(walls.order_by("-wall")[0])
    width = bin_width(first, last, FPS_BINS)
    # One bar's count, compiled once: its bounds and number are stand-ins, replaced bar by bar.
    bar = (
        found.filter(wall__gte=_LOW, wall__lt=_HIGH)
        .annotate(x=Value(_BAR))
        .values("x")
        .annotate(n=Count("pk"))
        .values_list("x", "n")
    )
    bars = range(math.ceil((last - first + 1) / width))
    counts = union_all(
        bar, (_LOW, _HIGH, _BAR), [(first + x * width, first + (x + 1) * width, x) for x in bars]
    )
    return fps_bars(counts, first, last, FPS_BINS)


# Stand-ins for a bar's bounds and number in its compiled count (no frame has such a wall).
_LOW, _HIGH, _BAR = -1.2345678901e300, -1.2345678902e300, -1234567890
