"""The overview's charts (queuectl.web.charts): each step's wait and run time percentiles from the history's
buckets, on SQLite and PostgreSQL; gaps where a step had no sample; a week's 168 steps; the y axis; and the
SVG the template draws: well-formed, labelled for screen readers, its text escaped, its size bounded."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from queuectl.api.history import HistoryRow, quantile, window
from queuectl.store.request import Exchange, Outcome
from queuectl.store.activity import BOUNDS
from queuectl.web.charts import SPANS, throughput
from queuectl.web.charts.frame import LEFT, WIDTH, Steps, seconds
from queuectl.web.charts.lines import BOTTOM, MARKS, SPACING, TOP, latency, scale, series
from support.worker_steps import add, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


SVG = "{http://www.w3.org/2000/svg}"
#: A minute's and an hour's start (Unix seconds).
T0 = 1_000_020.0
HOUR0 = 1_000_800.0


def buckets(*times: float) -> tuple:
    """The counts per bucket of BOUNDS of `times` (seconds), as the store keeps them."""
    counts = [0] * len(BOUNDS)
    for t in times:
        counts[next(i for i, upper in enumerate(BOUNDS) if t <= upper)] += 1
    return tuple(counts)


def row(at: float, wait=(None, None), run=(None, None), completed: int = 1) -> HistoryRow:
    return HistoryRow(at, "", completed, completed, 0, 0, 0, 0, *wait, *run)


def test_each_step_s_percentiles_are_those_of_its_buckets(db, store):
    """Three minutes of a span: two with runs of known times (due at T0, started `wait` seconds later), one
    between them with none (a gap); the chart's values are quantile() of each minute's buckets."""
    minutes = {0: [(0.3, 0.3)] * 4, 2: [(1.5, 2.0), (1.6, 7.0)]}  # minute: [(wait, run)]
    w = register(store)
    n = 0
    for minute, runs in minutes.items():
        due = T0 + 60 * minute
        ids = []
        for _ in runs:
            n += 1
            ids.append(add(store, due, id=f"j{n}"))
        store.exchange(w, Exchange(claim=len(ids)), [], due)
        store.exchange(w, Exchange(ended=[Outcome(j, True, 0, None, started_at=due + wait, ended_at=due + wait + run)
                                          for j, (wait, run) in zip(ids, runs)]), [], due + 20)
    store.maintain(w)
    now = T0 + 60 * 2 + 30
    rows, _ = window(store, since=3600, step=60, by_queue=False, now=now)
    steps = Steps.of(now, 3600, 60)
    assert steps.count == 60 and steps.at(59) == T0 + 120 and steps.at(57) == T0
    for kind, pick in (("wait", 0), ("run", 1)):
        got = series(kind, rows, steps)
        for p, q in (("p50", 0.5), ("p95", 0.95)):
            want = [None] * 60
            want[57] = quantile(q, buckets(*(r[pick] for r in minutes[0])))
            want[59] = quantile(q, buckets(*(r[pick] for r in minutes[2])))
            assert got[p] == pytest.approx(want), (kind, p)
    assert series("run", rows, steps)["p50"][57] == pytest.approx(0.375)  # 4 in (0.25, 0.5]: 0.25 + 0.25 * 2/4
    assert series("run", rows, steps)["p95"][59] == pytest.approx(9.5)  # rank 1.9 of 2: 5 + 5 * 0.9 in (5, 10]
    chart = throughput("hour", rows, [], now, 3600, 60)
    run = chart.lines[1]
    assert (run.kind, [line.name for line in run.lines]) == ("run", ["p50", "p95"])
    p50 = run.lines[0]
    assert p50.runs == () and [x for x, _ in p50.dots] == [steps.middle(57), steps.middle(59)]  # a gap between
    assert p50.dots[0][1] > p50.dots[1][1]  # 0.375 s is lower than 2.5 s (y grows downwards)
    assert [t.x for t in run.tips] == [steps.x(57), steps.x(59)]
    assert run.tips[1].label.endswith(": run p50 2.5 s, p95 9.5 s")
    assert run.summary == ("Run time (start to end) per minute over the last hour: p50 0.38 s to 2.5 s,"
                           " p95 0.49 s to 9.5 s; 2 of 60 minutes with a sample")


def test_gaps_split_the_lines_and_a_lone_step_is_a_dot():
    steps = Steps.of(HOUR0 + 5 * 3600 + 10, 86400, 3600)
    first = steps.first
    values = {0: 1.0, 1: 2.0, 2: 4.0, 5: 8.0, 7: 3.0, 8: 3.0}  # steps 3, 4 and 6 have no sample
    rows = [row(first + 3600 * i, run=(v, 2 * v)) for i, v in values.items()]
    rows.append(row(first + 3600 * 3, completed=2))  # jobs in step 3, but no run time: still a gap
    chart = latency("run", rows, steps, "day")
    p50, p95 = chart.lines
    assert [len(r.split()) for r in p50.runs] == [3, 2] and len(p50.dots) == 1
    assert p50.dots[0][0] == steps.middle(5)
    first_run = [tuple(map(float, point.split(","))) for point in p50.runs[0].split()]
    assert [x for x, _ in first_run] == [steps.middle(i) for i in range(3)]
    assert first_run[0][1] > first_run[1][1] > first_run[2][1]  # longer times higher up
    assert [len(r.split()) for r in p95.runs] == [3, 2]
    assert len(chart.tips) == 6 and "6 of 24 hours with a sample" in chart.summary
    wait = latency("wait", rows, steps, "day")
    assert wait.tips == () and all(not line.runs and not line.dots for line in wait.lines)
    assert wait.summary == "Wait time (due to start) per hour over the last day: no sample"


def test_a_week_is_168_hourly_points_within_the_drawing():
    name, span, step = SPANS[2]
    now = HOUR0 + 1234
    steps = Steps.of(now, span, step)
    assert (name, steps.count, steps.at(167)) == ("week", 168, HOUR0)
    rows = [row(steps.at(i), wait=(0.01 * (i + 1), 0.02 * (i + 1)), run=(5.0, 3600.0)) for i in range(168)]
    chart = throughput(name, rows, [], now, span, step)
    wait, run = chart.lines
    [points] = wait.lines[0].runs
    xy = [tuple(map(float, p.split(","))) for p in points.split()]
    assert len(xy) == 168 and len(wait.tips) == 168
    assert all(LEFT < x < WIDTH and TOP <= y <= BOTTOM for x, y in xy)
    assert all(a[0] < b[0] and a[1] >= b[1] for a, b in zip(xy, xy[1:]))  # later and longer: right and up
    assert len(chart.bars) == 168 and chart.bars[-1].x + chart.bars[-1].width <= WIDTH
    assert [line.runs[0].count(" ") + 1 for line in run.lines] == [168, 168]
    assert min(y for m in run.marks for y in [m.y]) == TOP  # 3600 s, the top mark: the history's longest


@pytest.mark.parametrize("values, marks", [
    ([], (0.001, 0.01)), ([None, None], (0.001, 0.01)), ([1.0], (1.0, 10.0)), ([3600.0], (600.0, 3600.0)),
    ([0.0001, 0.02], (0.001, 0.1)), ([0.3, 45.0, None], (0.1, 60.0)), ([7000.0], (600.0, 3600.0)),
    ([0.004, 2000.0], (0.001, 3600.0))])
def test_the_y_axis_spans_the_marks_the_times_need(values, marks):
    assert scale(values) == marks


def test_labelled_marks_do_not_overlap():
    steps = Steps.of(HOUR0, 3600, 60)
    rows = [row(steps.at(0), run=(0.002, 3000.0))]  # every mark from 1 ms to 1 h
    chart = latency("run", rows, steps, "hour")
    assert [m.y for m in chart.marks] == sorted((m.y for m in chart.marks), reverse=True)  # bottom up
    assert len(chart.marks) == len(MARKS) and chart.marks[0].label == "0.001 s" and chart.marks[-1].y == TOP
    shown = [m.y for m in chart.marks if m.label]
    assert 2 <= len(shown) < len(MARKS) and all(a - b >= SPACING for a, b in zip(shown, shown[1:]))


@pytest.mark.parametrize("value, said", [(None, "-"), (0.0042, "0.0042 s"), (0.5, "0.5 s"), (1.0, "1 s"),
                                         (2.53, "2.5 s"), (45.0, "45 s"), (600.0, "10 min"), (3600.0, "60 min"),
                                         (5400.0, "90 min"), (86400.0, "24 h")])
def test_durations_as_the_charts_say_them(value, said):
    assert seconds(value) == said


def macro(name: str):
    """The charts template's macro `name`, from the dashboard's own Jinja environment (autoescape on)."""
    from queuectl.web.app import create_app
    from queuectl.web.config import WebConfig

    app = create_app(WebConfig(), None, None)
    with app.app_context():
        return getattr(app.jinja_env.get_template("charts.html").module, name)


def parsed(markup: str) -> list[ET.Element]:
    """Each <svg> of `markup`, parsed as XML (it must be well-formed)."""
    found = re.findall(r"<svg\b.*?</svg>", str(markup), re.S)
    assert found
    return [ET.fromstring(svg.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1)) for svg in found]


def test_the_svg_is_well_formed_labelled_and_bounded():
    name, span, step = SPANS[2]
    now = HOUR0 + 10
    steps = Steps.of(now, span, step)
    rows = [row(steps.at(i), wait=(0.01 * (i + 1), 0.5), run=(1.0 + i, 3600.0), completed=i % 7)
            for i in range(168) if i != 100]
    markup = str(macro("chart")(throughput(name, rows, [row(steps.first, (0.3, 1.0), (2.0, 9.0))], now, span, step)))
    bars, wait, run = parsed(markup)
    for svg in (bars, wait, run):
        assert svg.get("role") == "img" and svg.get("aria-label")
        assert len(ET.tostring(svg)) < 40_000  # a week, every step drawn
    assert wait.get("class") == "lines wait" and run.get("class") == "lines run"
    assert wait.find(f"{SVG}title").text == wait.get("aria-label")
    assert wait.get("aria-label").endswith("167 of 168 hours with a sample")
    lines = wait.findall(f"{SVG}g")
    assert [g.get("class") for g in lines] == ["p50", "p95"]
    assert [len(g.findall(f"{SVG}polyline")) for g in lines] == [2, 2]  # broken at step 100
    tips = wait.findall(f"{SVG}rect[@class='tip']")
    assert len(tips) == 167 and all(t.find(f"{SVG}title").text.startswith(("19", "20")) for t in tips)
    assert "fill=" not in markup and "stroke=" not in markup and "style=" not in markup  # colours: the stylesheet's


def test_the_svg_escapes_its_text():
    hostile = '<script>alert(1)</script> & "quoted"'
    steps = Steps.of(HOUR0, 3600, 60)
    chart = latency("wait", [row(steps.at(3), wait=(1.0, 2.0))], steps, "hour")
    chart = chart._replace(heading=hostile, summary=hostile, tips=tuple(t._replace(label=hostile) for t in chart.tips))
    from queuectl.web.charts import Chart

    figure = Chart("hour", (), 0, {"completed": 0, "failed": 0, "dead": 0}, (None, None), (None, None),
                   (chart, chart))
    markup = str(macro("chart")(figure))
    assert "<script>" not in markup
    _, wait, _ = parsed(markup)
    assert wait.get("aria-label") == hostile and wait.find(f"{SVG}title").text == hostile
    assert wait.find(f"{SVG}rect[@class='tip']/{SVG}title").text == hostile


def test_an_empty_span_draws_its_axes_and_says_no_sample():
    markup = str(macro("chart")(throughput("day", [], [], HOUR0, 86400, 3600)))
    bars, wait, run = parsed(markup)
    assert bars.findall(f"{SVG}g") == [] and "Jobs ended per hour over the last day: 0 completed" in bars.get("aria-label")
    for svg in (wait, run):
        assert [t.text for t in svg.findall(f"{SVG}text[@class='none']")] == ["no sample"]
        assert svg.findall(f".//{SVG}polyline") == [] and svg.get("aria-label").endswith(": no sample")
