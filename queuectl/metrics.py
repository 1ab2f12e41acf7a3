"""The queue's state in the Prometheus text exposition format (version 0.0.4), for `queuectl metrics`.

Names follow Prometheus's conventions (https://prometheus.io/docs/practices/naming/): the
`queuectl_` prefix, base units (seconds), `_total` on counters. Every series that can
be zero is written as zero, so that a dashboard's queries see it before its first event.
"""

from __future__ import annotations

from queuectl.clock import Instant
from queuectl.models import JobState

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

    def sample(self, value: float, **labels: str) -> None:
        self.lines.append(f"{self._name}{_labels(**labels)} {_number(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(store, now: Instant, stale_after: float) -> str:
    """Return the metrics of `store` at `now` as Prometheus text (reads the store; writes nothing)."""
    from queuectl.control import worker_state

    counts = store.counts()
    paused = store.paused_queues()
    oldest = store.oldest_ready(now)
    runs = store.run_counts()
    workers = store.workers()
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

    states = [worker_state(w, now, stale_after) for w in workers]
    out.family("queuectl_workers", "gauge", "Registered workers, by state.")
    for state in WORKER_STATES:
        out.sample(states.count(state), state=state)
    out.family("queuectl_worker_slots", "gauge", "Job slots of the registered workers: busy, and in all.")
    out.sample(sum(len(w.job_ids) for w in workers), kind="busy")
    out.sample(sum(w.slots for w in workers), kind="total")

    out.family("queuectl_job_runs_total", "counter",
               "Runs of jobs that ended, by queue and outcome (kept when retention deletes the jobs).")
    for q in queues:
        for outcome in RUN_OUTCOMES:
            out.sample(runs.get(q, {}).get(outcome, 0), queue=q, outcome=outcome)
    return out.text()
