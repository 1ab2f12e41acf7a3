"""The wait and run time charts of a span: per step, the p50 and p95 of the jobs' wait (start - due) or run
(end - start) times, as lines on a logarithmic scale of seconds, broken where a step had no sample.

The percentiles are the history's own (queuectl.api.history: each step's buckets, Prometheus's
histogram_quantile), read from the HistoryRows: nothing is computed twice.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from queuectl.web.charts.frame import Steps, seconds

#: The drawing's height in SVG units, and the plot's top and bottom in it.
HEIGHT, TOP, BOTTOM = 72, 6, 66
#: The least distance between two labelled marks, SVG units (the labels' height): a mark closer to the one
#: below it is drawn without a label.
SPACING = 13.0
#: The y axis's marks, seconds, each said well by `seconds`; the axis is logarithmic from the highest mark at
#: or below the chart's shortest time to the lowest at or above its longest. A time under the first is drawn
#: on it; the history's longest is the last (its highest finite bucket bound).
MARKS = (0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0)
#: The lines of a chart: the percentiles, the suffix of their HistoryRow fields (wait_p50, ...) and CSS class.
PERCENTILES = ("p50", "p95")
#: What each chart shows, by kind (the HistoryRow fields' prefix).
KINDS = {"wait": "Wait time (due to start)", "run": "Run time (start to end)"}


class Line(NamedTuple):
    """A percentile's line: `name` (p50, p95, its CSS class), `runs` (each an SVG polyline's points, for two steps
    or more in a row with a sample) and `dots` ((x, y) of a step with a sample alone between gaps)."""

    name: str
    runs: tuple[str, ...]
    dots: tuple[tuple[float, float], ...]


class Mark(NamedTuple):
    """A mark of the y axis: its `y` (SVG units) and `label` (a duration; "" when too close to the one below)."""

    y: float
    label: str


class Tip(NamedTuple):
    """A step with a sample: its left `x` and `width` (SVG units) and `label` (the tooltip)."""

    x: float
    width: float
    label: str


class LineChart(NamedTuple):
    """A drawn wait or run time chart: `kind` (wait, run), `heading`, `summary` (its text alternative),
    `lines` (p50, p95), `marks` of the y axis and the `tips` of the steps with a sample (none: no sample)."""

    kind: str
    heading: str
    summary: str
    lines: tuple[Line, ...]
    marks: tuple[Mark, ...]
    tips: tuple[Tip, ...]

    #: The geometry the template draws with, SVG units.
    height, top, bottom = HEIGHT, TOP, BOTTOM


def series(kind: str, rows, steps: Steps) -> dict[str, list[float | None]]:
    """Return {"p50", "p95": a value a step (seconds; None: no sample in it)} of `kind` (wait or run) from `rows`
    (HistoryRows of all queues summed, one per step with activity) in `steps`."""
    by_at = {row.at: row for row in rows}
    out: dict[str, list[float | None]] = {p: [] for p in PERCENTILES}
    for i in range(steps.count):
        row = by_at.get(steps.at(i))
        for p in PERCENTILES:
            out[p].append(getattr(row, f"{kind}_{p}") if row is not None else None)
    return out


def scale(values) -> tuple[float, float]:
    """Return the y axis's lowest and highest marks (seconds) for `values` (seconds, None left out): two marks at
    least, MARKS's first and second without a value."""
    known = [min(max(v, MARKS[0]), MARKS[-1]) for v in values if v is not None]
    if not known:
        return MARKS[0], MARKS[1]
    low = max(m for m in MARKS if m <= min(known))
    high = min(m for m in MARKS if m >= max(known))
    if low == high:
        i = MARKS.index(low)
        low, high = (MARKS[i], MARKS[i + 1]) if i + 1 < len(MARKS) else (MARKS[i - 1], MARKS[i])
    return low, high


def latency(kind: str, rows, steps: Steps, span: str) -> LineChart:
    """Return the `kind` (wait or run) time chart of `rows` (HistoryRows of all queues summed, one per step with
    activity) in `steps`, the last `span` (hour, day, week: said in its summary)."""
    values = series(kind, rows, steps)
    low, high = scale(v for p in PERCENTILES for v in values[p])
    spread = math.log(high) - math.log(low)

    def y(value: float) -> float:
        clamped = min(max(value, low), high)
        return round(BOTTOM - (math.log(clamped) - math.log(low)) / spread * (BOTTOM - TOP), 1)

    lines = []
    for p in PERCENTILES:
        runs, dots, run = [], [], []
        for i, value in enumerate([*values[p], None]):  # the None ends the last run
            if value is not None:
                run.append((steps.middle(i), y(value)))
                continue
            if len(run) == 1:
                dots.append(run[0])
            elif run:
                runs.append(" ".join(f"{x:g},{yy:g}" for x, yy in run))
            run = []
        lines.append(Line(p, tuple(runs), tuple(dots)))
    tips = tuple(Tip(steps.x(i), round(steps.width, 2),
                     f"{steps.label(i)}: {kind} p50 {seconds(p50)}, p95 {seconds(p95)}")
                 for i, (p50, p95) in enumerate(zip(values["p50"], values["p95"]))
                 if p50 is not None or p95 is not None)
    marks, labelled = [], BOTTOM + SPACING
    for m in (m for m in MARKS if low <= m <= high):
        shown = labelled - y(m) >= SPACING
        labelled = y(m) if shown else labelled
        marks.append(Mark(y(m), seconds(m) if shown else ""))
    return LineChart(kind, KINDS[kind], summary(kind, values, steps, span), tuple(lines), tuple(marks), tips)


def summary(kind: str, values: dict, steps: Steps, span: str) -> str:
    """Return a chart's text alternative: what it shows, each line's range, and how many steps had a sample."""
    unit = "minute" if steps.step == 60 else "hour"
    said = f"{KINDS[kind]} per {unit} over the last {span}"
    known = {p: [v for v in values[p] if v is not None] for p in PERCENTILES}
    sampled = sum(1 for i in range(steps.count) if any(values[p][i] is not None for p in PERCENTILES))
    if not sampled:
        return f"{said}: no sample"
    ranges = ", ".join(f"{p} {seconds(min(known[p]))} to {seconds(max(known[p]))}" for p in PERCENTILES if known[p])
    return f"{said}: {ranges}; {sampled} of {steps.count} {unit}s with a sample"
