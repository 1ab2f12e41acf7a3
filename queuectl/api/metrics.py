"""The queue's state in the Prometheus text exposition format (version 0.0.4), for `queuectl metrics`.

Names follow Prometheus's conventions (https://prometheus.io/docs/practices/naming/): the
`queuectl_` prefix, base units (seconds), `_total` on counters. Every series that can
be zero is written as zero, so that a dashboard's queries see it before its first event.
"""

from __future__ import annotations

import os

from queuectl.domain.models import JobState
from queuectl.api.snapshot import Snapshot
from queuectl.domain.errors import InvalidInput
from queuectl.store.activity import BOUNDS

WORKER_STATES = ("running", "draining", "stale", "dead")
RUN_OUTCOMES = ("completed", "failed", "dead", "cancelled", "recovered", "requeued")


def _labels(**labels: str) -> str:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{escape(str(v))}"' for k, v in labels.items()) + "}" if labels else ""


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) and not value.is_integer() else str(int(value))


class Exposition:
    """Metric families written in order: `family(name, type, help)` then `sample(labels, value)`."""

    def __init__(self):
        self.lines: list[str] = []
        self._name = ""

    def family(self, name: str, kind: str, help_text: str) -> "Exposition":
        self._name = name
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        return self

    def sample(self, value: float, suffix: str = "", **labels: str) -> None:
        self.lines.append(f"{self._name}{suffix}{_labels(**labels)} {_number(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(snapshot: Snapshot, activity: dict | None = None) -> str:
    """Return `snapshot` (queuectl.api.snapshot.take) and the wait and run time histograms of `activity`
    ({queue: queuectl.store.activity.ActivityRow summed since the history began}, as store.activity_totals
    returns; None: none) as Prometheus text; reads nothing, writes nothing."""
    counts, paused, oldest, runs = snapshot.counts, snapshot.paused, snapshot.oldest_ready, snapshot.runs
    queues = sorted({*counts, *paused, *runs})
    out = Exposition()

    out.family("queuectl_jobs", "gauge", "Jobs in the queue, by queue and state.")
    for q in queues:
        for state in JobState:
            out.sample(counts.get(q, {}).get(state.value, 0), queue=q, state=state.value)
    out.family("queuectl_queue_oldest_ready_age_seconds", "gauge",
               "Seconds the oldest ready job of each queue has waited since it was due (queue latency; 0 if none).")
    for q in queues:
        out.sample(round(oldest.get(q, 0.0), 3), queue=q)
    out.family("queuectl_queue_paused", "gauge", "1 if the queue is paused (queuectl pause), else 0.")
    for q in queues:
        out.sample(1 if q in paused else 0, queue=q)

    limits = snapshot.limits
    out.family("queuectl_queue_concurrency_limit", "gauge",
               "The most jobs of the queue processing at once (queuectl limit --concurrency); only limited queues.")
    for q in sorted(q for q in limits if limits[q].concurrency is not None):
        out.sample(limits[q].concurrency, queue=q)
    out.family("queuectl_queue_rate_limit", "gauge",
               "The most job starts of the queue per window (queuectl limit --rate), by window in seconds.")
    for q in sorted(q for q in limits if limits[q].rate_count is not None):
        out.sample(limits[q].rate_count, queue=q, window_seconds=_number(limits[q].rate_window))

    out.family("queuectl_schedule_last_fire_timestamp_seconds", "gauge",
               "When each schedule last enqueued a run, Unix seconds (0 if never).")
    for sch in snapshot.schedules:
        out.sample(round(sch.fired_at or 0, 3), schedule=sch.name)
    out.family("queuectl_schedule_next_run_timestamp_seconds", "gauge",
               "Each schedule's next slot, Unix seconds (0 while paused).")
    for sch in snapshot.schedules:
        out.sample(0 if sch.paused_at else sch.next_at, schedule=sch.name)
    out.family("queuectl_schedule_skipped_total", "counter",
               "Slots each schedule skipped because its previous run had not ended (overlap skip).")
    for sch in snapshot.schedules:
        out.sample(sch.skipped, schedule=sch.name)

    states = [w.state for w in snapshot.workers]
    out.family("queuectl_workers", "gauge", "Registered workers, by state.")
    for state in WORKER_STATES:
        out.sample(states.count(state), state=state)
    out.family("queuectl_worker_slots", "gauge", "Job slots of the registered workers: busy, and in all.")
    out.sample(sum(len(w.info.job_ids) for w in snapshot.workers), kind="busy")
    out.sample(sum(w.info.slots for w in snapshot.workers), kind="total")

    out.family("queuectl_job_runs_total", "counter",
               "Runs of jobs that ended, by queue and outcome (kept when retention deletes the jobs).")
    for q in queues:
        for outcome in RUN_OUTCOMES:
            out.sample(runs.get(q, {}).get(outcome, 0), queue=q, outcome=outcome)
    if activity is not None:
        _histograms(out, activity)
    return out.text()


def _histograms(out: Exposition, activity: dict) -> None:
    """The wait and run time histograms, per queue: cumulative `_bucket`s by `le`, `_sum`, `_count`."""
    for name, what, field in (("queuectl_job_wait_seconds", "from due to start", "wait"),
                              ("queuectl_job_run_seconds", "from start to end", "run")):
        out.family(name, "histogram", f"Seconds jobs took {what}, by queue (kept when retention deletes history).")
        for q in sorted(activity):
            row, seen = activity[q], 0
            for bound, n in zip(BOUNDS, getattr(row, field)):
                seen += n
                out.sample(seen, suffix="_bucket", queue=q, le="+Inf" if bound == float("inf") else repr(bound))
            out.sample(round(getattr(row, f"{field}_sum"), 6), suffix="_sum", queue=q)
            out.sample(seen, suffix="_count", queue=q)


def check_target(path: str) -> str:
    """Return the absolute path of a metrics file to write; raises InvalidInput for an empty path or a
    missing directory."""
    if not path.strip():
        raise InvalidInput("--output is empty: give a file path")
    target = os.path.abspath(path)
    if not os.path.isdir(os.path.dirname(target)):
        raise InvalidInput(f"directory {os.path.dirname(target)} does not exist")
    return target


def write_file(text: str, path: str) -> str:
    """Write `text` to `path` atomically (a temporary file beside it, mode 0644, renamed over it) for
    node_exporter's textfile collector, which must never read half a file; return the absolute path.

    Raises InvalidInput for an empty path, a missing directory or a write that fails (the
    temporary file is removed then).
    """
    target = check_target(path)
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # readable by node_exporter's user whatever the umask
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InvalidInput(f"cannot write {target}: {e.strerror}") from None
    return target
