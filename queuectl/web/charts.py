"""Charts of the activity history, drawn on the server as SVG (no script, no third-party code): jobs ended per
step over a span (completed, failed with a retry scheduled, dead), stacked, with the span's wait and run
time percentiles beside them.

`throughput` computes the geometry; the template (templates/chart.html) draws it, its colours from the
stylesheet so that the light and dark themes both apply.
"""

from __future__ import annotations

from typing import NamedTuple

#: The spans the overview charts, with their step: (name, span seconds, step seconds).
SPANS = (("hour", 3600.0, 60.0), ("day", 86400.0, 3600.0), ("week", 7 * 86400.0, 3600.0))
#: The drawing's size in SVG units (it scales with the page).
WIDTH, HEIGHT = 600, 120
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


class Chart(NamedTuple):
    """A drawn span: `name` (hour, day, week), `bars`, `peak` (the tallest bar's jobs), the totals of each part
    and the percentiles over the span (None: no sample)."""

    name: str
    bars: tuple[Bar, ...]
    peak: int
    totals: dict
    wait: tuple[float | None, float | None]
    run: tuple[float | None, float | None]


def throughput(name: str, rows, span_rows, now: float, span: float, step: float) -> Chart:
    """Return the chart of `rows` (HistoryRows of all queues summed, one per step with activity) over the last
    `span` seconds to `now` (Unix seconds) in steps of `step`; `span_rows`, the same span summed into one row
    (or none), gives the percentiles."""
    import time

    steps = int(span // step)
    first = (now // step - steps + 1) * step
    by_at = {row.at: row for row in rows}
    peak = max([sum(getattr(r, f) for f, _ in PARTS) for r in rows] or [0])
    scale = (HEIGHT - 4) / peak if peak else 0.0
    width = WIDTH / steps
    bars = []
    for i in range(steps):
        at = first + i * step
        row = by_at.get(at)
        if row is None:
            continue
        y, segments = float(HEIGHT), []
        for field, part in PARTS:
            n = getattr(row, field)
            if n:
                h = max(n * scale, 1.0)
                y -= h
                segments.append(Segment(round(y, 2), round(h, 2), part))
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
        label = f"{when}: {row.completed} completed, {row.failed} failed, {row.dead} dead"
        bars.append(Bar(round(i * width, 2), round(max(width - 0.5, 0.5), 2), tuple(segments), label))
    totals = {field: sum(getattr(r, field) for r in rows) for field, _ in PARTS}
    whole = span_rows[0] if span_rows else None
    return Chart(name, tuple(bars), peak, totals,
                 (whole.wait_p50, whole.wait_p95) if whole else (None, None),
                 (whole.run_p50, whole.run_p95) if whole else (None, None))


def seconds(value: float | None) -> str:
    """Return a duration for a chart's legend ("0.4 s", "12 s", "3.5 min", "-" for none)."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.2g} s" if value < 1 else f"{value:.1f} s"
    if value < 120:
        return f"{value:.0f} s"
    return f"{value / 60:.1f} min" if value < 7200 else f"{value / 3600:.1f} h"
