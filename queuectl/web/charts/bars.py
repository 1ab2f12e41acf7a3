"""The throughput chart of a span: the jobs that ended in each step, stacked bars of completed, failed (a retry
scheduled) and dead."""

from __future__ import annotations

from typing import NamedTuple

from queuectl.web.charts.frame import Steps

#: The bars' drawing height in SVG units, and the space above the tallest bar.
HEIGHT, TOP = 80, 4
#: The stacked parts of a bar, bottom first: (the HistoryRow field, its CSS class).
PARTS = (("completed", "completed"), ("failed", "failed"), ("dead", "dead"))


class Segment(NamedTuple):
    y: float
    height: float
    part: str


class Bar(NamedTuple):
    """One step: its left `x` and `width`, its stacked `segments`, and `label` (the tooltip)."""

    x: float
    width: float
    segments: tuple[Segment, ...]
    label: str


class Bars(NamedTuple):
    """A span's bars (steps without an ended job have none), `peak` (the tallest bar's jobs) and the totals of
    each part over the span."""

    bars: tuple[Bar, ...]
    peak: int
    totals: dict


def stacked(rows, steps: Steps) -> Bars:
    """Return the bars of `rows` (HistoryRows of all queues summed, one per step with activity) in `steps`."""
    by_at = {row.at: row for row in rows}
    peak = max([sum(getattr(r, f) for f, _ in PARTS) for r in rows] or [0])
    scale = (HEIGHT - TOP) / peak if peak else 0.0
    drawn = []
    for i in range(steps.count):
        row = by_at.get(steps.at(i))
        if row is None:
            continue
        y, segments = HEIGHT, []
        for field, part in PARTS:
            n = getattr(row, field)
            if n:
                h = max(n * scale, 1.0)
                y -= h
                segments.append(Segment(round(y, 2), round(h, 2), part))
        label = f"{steps.label(i)}: {row.completed} completed, {row.failed} failed, {row.dead} dead"
        drawn.append(Bar(steps.x(i), round(max(steps.width - 0.5, 0.5), 2), tuple(segments), label))
    totals = {field: sum(getattr(r, field) for r in rows) for field, _ in PARTS}
    return Bars(tuple(drawn), peak, totals)
