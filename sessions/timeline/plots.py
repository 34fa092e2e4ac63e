"""The Conformance tab's plots, bucketed for server-rendered SVG: latency by method, latency over time,
frames per second.

The database does the counting: frames by second, latency bucket and (answers) method, in one
grouped query (a latency's bucket a ``CASE`` over the edges), so a
100,000-frame session sends Python a few hundred rows, never a row a frame. The rest is pure: it
folds those counts into histograms, a heatmap and rates.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import BigIntegerField, Case, Count, F, IntegerField, Q, Value, When
from django.db.models.functions import Cast

from sessions.models import McpSession, TimelineFrame

__all__ = [
    "EDGES_MS",
    "Bar",
    "FpsBar",
    "HeatCell",
    "MethodLatency",
    "bucket_of",
    "frames_per_second",
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
    seconds = last - first + 1
    width = max(1, math.ceil(seconds / bins))
    cells: dict[tuple[int, int], int] = {}
    for second, bucket, n in found:
        key = ((second - first) // width, min(bucket, BUCKETS - 1))
        cells[key] = cells.get(key, 0) + n
    most = max(cells.values())
    drawn = [
        # Opacity on a log scale: one answer still shows next to a thousand.
        HeatCell(x, BUCKETS - 1 - b, n, 0.2 + 0.8 * math.log1p(n) / math.log1p(most))
        for (x, b), n in sorted(cells.items())
    ]
    columns = math.ceil(seconds / width)
    return Heatmap(drawn, float(first), float(first + columns * width), columns, most)


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
    seconds = last - first + 1
    bin_seconds = max(1, math.ceil(seconds / bins))
    shown = math.ceil(seconds / bin_seconds)
    totals = [0] * shown
    for second, n in counts:
        totals[(second - first) // bin_seconds] += n
    rates = [n / bin_seconds for n in totals]
    peak = max(rates)
    bars = [FpsBar(i, rate, 100 * rate / peak) for i, rate in enumerate(rates) if rate]
    return FpsPlot(bars, float(first), seconds, shown, peak, sum(totals), bin_seconds)


ANSWER = Q(direction="in", latency_ms__isnull=False)


def _bucket() -> Case:
    """The latency bucket of an answer, in SQL (-1 for a frame that is not an answer)."""
    edges = [When(latency_ms__lt=edge, then=Value(i)) for i, edge in enumerate(EDGES_MS)]
    return Case(
        When(~ANSWER, then=Value(-1)), *edges, default=Value(len(EDGES_MS)), output_field=IntegerField()
    )


def plots(session: McpSession, frames: Any = None) -> dict[str, Any]:
    """Everything the Conformance tab plots, from one grouped query: the database counts each
    second's frames by latency bucket and, for answers, by method (a few hundred rows, not a row a
    frame). On PostgreSQL the cast rounds rather than truncates: a frame may count in the next
    second, which these plots do not mind."""
    found = (TimelineFrame.objects.filter(session=session) if frames is None else frames).order_by()
    grouped = (
        found.annotate(
            second=Cast("wall", BigIntegerField()),
            bucket=_bucket(),
            answered=Case(When(ANSWER, then=F("method")), default=Value("")),
        )
        .values_list("second", "bucket", "answered")
        .annotate(n=Count("pk"))
    )
    per_method: dict[tuple[str, int], int] = {}
    per_bucket: dict[tuple[int, int], int] = {}
    per_second: dict[int, int] = {}
    for second, bucket, method, n in grouped:
        per_second[second] = per_second.get(second, 0) + n
        if bucket >= 0:
            per_bucket[second, bucket] = per_bucket.get((second, bucket), 0) + n
            per_method[method, bucket] = per_method.get((method, bucket), 0) + n
    return {
        "latency_methods": latency_by_method((m, b, n) for (m, b), n in per_method.items()),
        "latency_heatmap": latency_over_time((s, b, n) for (s, b), n in per_bucket.items()),
        "fps": frames_per_second(per_second.items()),
        "latency_axis": AXIS,
        "latency_buckets": BUCKETS,
    }
