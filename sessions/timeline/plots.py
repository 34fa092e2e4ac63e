"""The Conformance tab's plots, bucketed for server-rendered SVG: latency by method, latency over time,
frames per second.

The bucketing is pure and takes one pass over plain tuples; the queries read only what it needs: one
``values_list`` of the answered requests (the newest ``SCAN``, as the latency table does) and the
frames counted per second by the database, so a 100,000-frame session costs no model instance.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import BigIntegerField, Count
from django.db.models.functions import Cast

from sessions.models import McpSession, TimelineFrame
from sessions.timeline.conformance import SCAN, percentile

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
    """One method's answers by latency bucket, with its p50 and p95 (their buckets, to mark them)."""

    method: str
    count: int
    buckets: list[int]
    p50: float
    p95: float
    p50_bucket: int = 0
    p95_bucket: int = 0
    bars: list[Bar] = field(default_factory=list)  # the non-empty buckets


def latency_by_method(
    answers: Iterable[tuple[str, float]], shown: int = METHODS_SHOWN
) -> list[MethodLatency]:
    """Per method (the most answered first, at most ``shown``), its answers' latency histogram."""
    values: dict[str, list[float]] = {}
    for method, latency in answers:
        values.setdefault(method or "?", []).append(latency)
    rows = []
    for method, found in sorted(values.items(), key=lambda item: (-len(item[1]), item[0]))[:shown]:
        found.sort()
        buckets = [0] * BUCKETS
        for latency in found:
            buckets[bucket_of(latency)] += 1
        p50, p95 = percentile(found, 0.5), percentile(found, 0.95)
        row = MethodLatency(method, len(found), buckets, p50, p95, bucket_of(p50), bucket_of(p95))
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


def latency_over_time(points: Iterable[tuple[float, float]], bins: int = TIME_BINS) -> Heatmap | None:
    """(wall, latency_ms) of answers as a time × latency-bucket heatmap; None without answers."""
    pairs = list(points)
    if not pairs:
        return None
    start = min(wall for wall, _ in pairs)
    end = max(wall for wall, _ in pairs)
    width = (end - start) / bins or 1.0
    counts: dict[tuple[int, int], int] = {}
    for wall, latency in pairs:
        key = (min(bins - 1, int((wall - start) / width)), bucket_of(latency))
        counts[key] = counts.get(key, 0) + 1
    most = max(counts.values())
    cells = [
        # Opacity on a log scale: one answer still shows next to a thousand.
        HeatCell(x, BUCKETS - 1 - b, n, 0.2 + 0.8 * math.log1p(n) / math.log1p(most))
        for (x, b), n in sorted(counts.items())
    ]
    return Heatmap(cells, start, end, bins, most)


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


def plots(session: McpSession, frames: Any = None) -> dict[str, Any]:
    """Everything the Conformance tab plots, from two queries."""
    found = TimelineFrame.objects.filter(session=session) if frames is None else frames
    answers = list(
        found.filter(direction="in", latency_ms__isnull=False)
        .order_by("-seq")
        .values_list("wall", "method", "latency_ms")[:SCAN]
    )
    per_second = (
        found.order_by()
        .annotate(second=Cast("wall", BigIntegerField()))
        .values_list("second")
        .annotate(n=Count("pk"))
        .values_list("second", "n")
    )
    return {
        "latency_methods": latency_by_method((method, latency) for _, method, latency in answers),
        "latency_heatmap": latency_over_time((wall, latency) for wall, _, latency in answers),
        "fps": frames_per_second(per_second),
        "latency_axis": AXIS,
        "latency_buckets": BUCKETS,
    }
