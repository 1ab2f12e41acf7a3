"""What `queuectl top` shows, from one reading of the api: pure, without a terminal.

`build(reading, view)` turns a Reading (the snapshot, the running and newest dead jobs, the
activity history and the worker units, as queuectl.tui.source read them) and the viewer's state
(filter, selection, read-only, outage) into a Model: panes of rows of printable cells, which
queuectl.tui.layout fits to a terminal's size. Every cell of user data goes through
queuectl.domain.models.printable (the one rule for text that reaches a terminal) here, where the view
takes text in.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from queuectl.domain.models import JobState, printable
from queuectl.domain.recurrence import Rule

#: Minutes of throughput the view keeps per queue (the last hour, one value a minute).
MINUTES = 60
#: The running jobs and the dead letter queue's newest entries read per interval, at most.
RUNNING_SHOWN, DEAD_SHOWN = 100, 20

#: Short column names of the job states, in JobState's order (the queue pane's header).
STATE_HEADS = {"pending": "PEND", "processing": "RUN", "completed": "DONE", "failed": "FAIL",
               "dead": "DEAD", "cancelled": "CANC", "blocked": "BLKD"}


class Reading(NamedTuple):
    """What one interval read through the api: `snapshot` (queuectl.api.snapshot.Snapshot), `running` and
    `dead` (Jobs, newest first), `history` (HistoryRows of the last hour's minutes per queue, None when
    not read), `spans` ({queue: the hour summed into one HistoryRow}, None when not read), `units` ({worker
    id: its unit's queuectl.api.units.UnitState}, for this host's workers under systemd) and `db` (the
    database as it may be shown: queuectl.store's describe, never a password)."""

    snapshot: Any
    running: list
    dead: list
    history: list | None
    spans: dict | None
    units: dict
    db: str


class Spark(NamedTuple):
    """A series drawn as a sparkline: jobs ended per minute, oldest first (the last minute may be partial)."""

    values: tuple[int, ...]


class Row(NamedTuple):
    """One line of a pane: `key` is what selecting it selects (("queue", name) or ("job", id); None: not
    selectable), `cells` its printable cells (a Spark in the throughput pane)."""

    key: tuple[str, str] | None
    cells: tuple


class Pane(NamedTuple):
    """A titled table: `columns` its headers, `drop` the indexes of the columns to leave out first when
    the terminal is narrow (in that order), `flex` the column that takes the width left (or None)."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[Row]
    drop: tuple[int, ...] = ()
    flex: int | None = None


class View:
    """The viewer's state that outlives a reading: filter, selection, read-only, outage, the footer's message."""

    def __init__(self, interval: float = 2.0, read_only: bool = False, why_read_only: str = ""):
        self.interval = interval
        self.read_only = read_only
        self.why_read_only = why_read_only  # "" for --read-only; else what made it read-only
        self.filter = ""
        self.selected: tuple[str, str] | None = None
        self.outage: str | None = None  # why the last read failed, while the database is unavailable
        self.outage_since: float | None = None  # monotonic seconds
        self.message = ""  # the footer's line for the last action (or the question of a confirmation)
        self.read_at: float | None = None  # wall time of the reading shown


class Model(NamedTuple):
    """A screen's content: `header` lines, the `panes`, the `footer` line, and whether it is an alert."""

    header: list[tuple[str, str]]
    panes: list[Pane]
    footer: str
    selectable: list[tuple[str, str]]


def matches(text: str, *fields) -> bool:
    """Return True if the filter `text` is empty or is part of one of `fields` (case-insensitive)."""
    if not text:
        return True
    needle = text.casefold()
    return any(needle in str(f).casefold() for f in fields if f is not None)


def ago(seconds: float | None) -> str:
    """Return seconds as a short age: "4.2s", "12m03s", "3h05m", "2d04h"; "-" for None."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def span(p50: float | None, p95: float | None) -> str:
    """Return a p50/p95 pair of seconds as "0.4s/1.2s" ("-" for no sample)."""
    def one(v):
        return "-" if v is None else f"{v:.1f}s" if v < 60 else ago(v)
    return "-" if p50 is None and p95 is None else f"{one(p50)}/{one(p95)}"


def build(reading: Reading, view: View) -> Model:
    """Return the Model of `reading` as `view` shows it (its filter applied, its selection kept if still there)."""
    snap, f = reading.snapshot, view.filter
    panes = [queues_pane(snap, f), throughput_pane(reading.history, reading.spans, snap, f), workers_pane(snap, reading.units, f),
             running_pane(reading.running, snap, f), schedules_pane(snap, f), dead_pane(reading.dead, snap, f)]
    selectable = [r.key for p in panes for r in p.rows if r.key is not None]
    if view.selected not in selectable:
        view.selected = selectable[0] if selectable else None
    return Model(header(reading, view), panes, footer(view), selectable)


def header(reading: Reading, view: View) -> list[tuple[str, str]]:
    """The header's lines as (text, style): what is shown and how fresh it is, the totals, an outage."""
    at = time.strftime("%H:%M:%S", time.localtime(view.read_at)) if view.read_at else "-"
    parts = ["queuectl top -"]  # the database last: a long path is what the width cuts
    if view.read_only:
        parts.append(f"read-only ({view.why_read_only})" if view.why_read_only else "read-only")
    if view.filter:
        parts.append(f"filter: {printable(view.filter)}")
    parts += [at, f"every {view.interval:g}s", printable(reading.db)]
    lines = [("  ".join(parts), "title")]
    lines.append(("  ".join(f"{s} {n}" for s, n in reading.snapshot.totals.items()), "normal"))
    if view.outage is not None:
        since = time.monotonic() - view.outage_since if view.outage_since is not None else 0.0
        lines.append((f"database unavailable for {ago(since)}: {printable(view.outage)}; showing the reading of {at},"
                      f" retrying every {view.interval:g}s", "alert"))
    return lines


def footer(view: View) -> str:
    """The footer's line: the last action's message, else the keys."""
    if view.message:
        return printable(view.message)
    keys = "j/k select  Enter open  / filter"
    if not view.read_only:
        keys += "  p pause  c cancel  r retry"
    return keys + "  ? keys  q quit"


def queues_pane(snap, f: str) -> Pane:
    """Jobs by state per queue, with the queue's limit, pause and oldest ready job's wait."""
    rows = []
    for q, counts in snap.queues.items():
        if not matches(f, q):
            continue
        limit = snap.limits[q].text if q in snap.limits else "-"
        oldest = ago(snap.oldest_ready[q]) if q in snap.oldest_ready else "-"
        rows.append(Row(("queue", q), (printable(q), *(str(n) for n in counts.values()),
                                       "paused" if q in snap.paused else "-", oldest, limit)))
    columns = ("QUEUE", *(STATE_HEADS[s.value] for s in JobState), "PAUSED", "OLDEST", "LIMIT")
    # Narrow: the limit, then the oldest wait, then blocked and cancelled go first.
    return Pane("queues", f"Queues ({len(rows)})", columns, rows, drop=(10, 9, 7, 6), flex=10)


def minutes(history, now: float) -> dict[str, dict]:
    """Return {queue: {"ended": MINUTES values oldest first, "total": their sum}} from history rows of one
    minute each (`now`: Unix seconds; a row's `at` is its minute's start)."""
    per: dict[str, dict] = {}
    for row in sorted(history or (), key=lambda r: r.at):
        q = per.setdefault(row.queue, {"ended": [0] * MINUTES, "total": 0})
        back = int((now - row.at) // 60)
        if 0 <= back < MINUTES:
            ended = row.completed + row.failed + row.dead
            q["ended"][MINUTES - 1 - back] += ended
            q["total"] += ended
    return per


def throughput_pane(history, spans, snap, f: str) -> Pane:
    """Jobs ended (completed, failed, dead) per minute over the last hour per queue, with the wait and run
    p50/p95 over that hour (`spans`: queuectl.api.history.window's)."""
    rows = []
    if history is not None:
        for q, data in sorted(minutes(history, snap.now.wall).items()):
            if not matches(f, q):
                continue
            hour = (spans or {}).get(q)
            rows.append(Row(None, (printable(q), Spark(tuple(data["ended"])), f"{data['ended'][-2]}",
                                   f"{data['total']}",
                                   span(hour.wait_p50, hour.wait_p95) if hour else "-",
                                   span(hour.run_p50, hour.run_p95) if hour else "-")))
    title = "Throughput: jobs ended per minute, last hour" if history is not None else "Throughput: no history"
    return Pane("throughput", title, ("QUEUE", "LAST HOUR", "/MIN", "1H", "WAIT p50/95", "RUN p50/95"), rows,
                drop=(3,), flex=1)


def workers_pane(snap, units: dict, f: str) -> Pane:
    """The registered workers: host, state, slots busy of total, heartbeat age, unit and its restarts."""
    rows = []
    for w in snap.workers:
        info = w.info
        if info.queues and not matches(f, info.name, info.host, info.queues, info.unit, *info.job_ids):
            continue  # (a worker of every queue serves the queue filtered too)
        unit = units.get(info.id)
        restarts = unit.restarts if unit else "-"  # systemd is asked on this host only
        rows.append(Row(None, (printable(info.name), printable(info.host), w.state,
                               f"{len(info.job_ids)}/{info.slots}", ago(w.heartbeat_age),
                               printable(info.unit or "-"), str(restarts), printable(info.queues or "*"))))
    return Pane("workers", f"Workers ({len(rows)})",
                ("NAME", "HOST", "STATE", "BUSY", "BEAT", "UNIT", "RESTARTS", "QUEUES"), rows,
                drop=(6, 5, 7), flex=7)


def running_pane(running: list, snap, f: str) -> Pane:
    """The running jobs with their elapsed time, oldest first."""
    names = {w.info.id: w.info.name for w in snap.workers}
    rows = []
    for job in sorted(running, key=lambda j: j.started_at or 0):
        if not matches(f, job.id, job.queue, job.command):
            continue
        elapsed = None if job.started_at is None else snap.now.wall - job.started_at
        rows.append(Row(("job", job.id), (printable(job.id), printable(job.queue), ago(elapsed),
                                          str(job.attempts), printable(names.get(job.worker_id, "-")),
                                          printable(job.command))))
    return Pane("running", f"Running ({len(rows)})", ("JOB", "QUEUE", "ELAPSED", "TRY", "WORKER", "COMMAND"),
                rows, drop=(4, 3), flex=5)


def schedules_pane(snap, f: str) -> Pane:
    """The schedules by next run."""
    rows = []
    for sch in sorted(snap.schedules, key=lambda s: (s.paused_at is not None, s.next_at)):
        if not matches(f, sch.name, sch.template.get("queue"), sch.template.get("command")):
            continue
        nxt = "paused" if sch.paused_at is not None else f"in {ago(sch.next_at - snap.now.wall)}"
        rows.append(Row(None, (printable(sch.name), nxt, printable(Rule.of(sch).text),
                               sch.last_state.value if sch.last_state else "-")))
    return Pane("schedules", f"Schedules ({len(rows)})", ("NAME", "NEXT RUN", "RULE", "LAST"), rows,
                drop=(3,), flex=2)


def dead_pane(dead: list, snap, f: str) -> Pane:
    """The dead letter queue's newest entries, with their last error."""
    rows = []
    for job in dead:
        if not matches(f, job.id, job.queue, job.command, job.last_error):
            continue
        died = job.finished_at or job.updated_at
        rows.append(Row(("job", job.id), (printable(job.id), printable(job.queue), ago(snap.now.wall - died),
                                          str(job.attempts), printable(job.last_error or "-"))))
    return Pane("dead", f"Dead letter queue (newest {len(rows)})", ("JOB", "QUEUE", "DIED", "TRIES", "ERROR"),
                rows, drop=(3,), flex=4)


def move(view: View, selectable: list, step: int) -> None:
    """Move the selection `step` rows (negative: up), staying within the selectable rows."""
    if not selectable:
        view.selected = None
        return
    at = selectable.index(view.selected) if view.selected in selectable else 0
    view.selected = selectable[max(0, min(len(selectable) - 1, at + step))]


def detail(job, now: float) -> tuple[list[str], list[str]]:
    """Return a job's record as lines and its output as lines (stdout, then stderr under a rule), printable.

    `now`: Unix seconds, for its ages. A carriage return shows what a terminal would have left:
    the text after the last one on its line; tabs go to every eighth column.
    """
    def when(t):
        return "-" if t is None else f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))} ({ago(now - t)} ago)"

    tries = f"{job.attempts}" + ("" if job.max_retries is None else f" (max retries {job.max_retries})")
    record = [f"job {printable(job.id)}  queue {printable(job.queue)}  state {job.state.value}  attempts {tries}",
              f"command: {printable(job.command)}",
              f"created {when(job.created_at)}   started {when(job.started_at)}",
              f"finished {when(job.finished_at)}   exit code {'-' if job.exit_code is None else job.exit_code}"]
    if job.last_error:
        record.append(f"last error: {printable(job.last_error)}")
    output = []
    for name, data in (("stdout", job.stdout), ("stderr", job.stderr)):
        if not data:
            continue
        if name == "stderr" and output:
            output.append("--- stderr ---")
        output.extend(printable(line.rsplit("\r", 1)[-1].expandtabs())
                      for line in data.decode("utf-8", "replace").rstrip("\n").split("\n"))
    return record, output or ["(no output yet)" if not job.state.ended else "(no output)"]
