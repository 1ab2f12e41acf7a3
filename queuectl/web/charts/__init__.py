"""Charts of the activity history, drawn on the server as SVG (no script, no third-party code), a figure per
span (the last hour per minute, day and week per hour): the jobs that ended in each step, stacked
(charts.bars), and under them the wait and run time p50 and p95 of each step as lines (charts.lines), with
the span's own percentiles in its caption.

`throughput` computes the geometry; the template (templates/charts.html) draws it, its colours from the
stylesheet's classes so that the light and dark themes both apply.
"""

from __future__ import annotations

from typing import NamedTuple

from queuectl.web.charts.bars import HEIGHT as BARS_HEIGHT, Bar, stacked
from queuectl.web.charts.frame import LEFT, WIDTH, Steps, seconds
from queuectl.web.charts.lines import LineChart, latency

__all__ = ["SPANS", "Chart", "seconds", "throughput"]

#: The spans the overview charts, with their step: (name, span seconds, step seconds).
SPANS = (("hour", 3600.0, 60.0), ("day", 86400.0, 3600.0), ("week", 7 * 86400.0, 3600.0))


class Chart(NamedTuple):
    """A drawn span: `name` (hour, day, week), `bars`, `peak` (the tallest bar's jobs), the `totals` of each part,
    the `wait` and `run` percentiles (p50, p95) over the span (None: no sample), and `lines`: the wait and run
    time charts of its steps."""

    name: str
    bars: tuple[Bar, ...]
    peak: int
    totals: dict
    wait: tuple[float | None, float | None]
    run: tuple[float | None, float | None]
    lines: tuple[LineChart, LineChart]

    #: The geometry the template draws with, SVG units.
    width, left, height = WIDTH, LEFT, BARS_HEIGHT


def throughput(name: str, rows, span_rows, now: float, span: float, step: float) -> Chart:
    """Return the charts of `rows` (HistoryRows of all queues summed, one per step with activity) over the last
    `span` seconds to `now` (Unix seconds) in steps of `step`; `span_rows`, the same span summed into one row
    (or none), gives the span's percentiles."""
    steps = Steps.of(now, span, step)
    drawn = stacked(rows, steps)
    whole = span_rows[0] if span_rows else None
    return Chart(name, drawn.bars, drawn.peak, drawn.totals,
                 (whole.wait_p50, whole.wait_p95) if whole else (None, None),
                 (whole.run_p50, whole.run_p95) if whole else (None, None),
                 (latency("wait", rows, steps, name), latency("run", rows, steps, name)))
