"""One reading of the queue's state, which `queuectl status` and `queuectl metrics` both format.

`take(store)` reads everything the two reports show, once; `status` (queuectl.cli.jobs) prints
a Snapshot as tables or JSON, `queuectl.api.metrics.render` as the Prometheus text format. It
writes nothing. The reads are separate statements, not one transaction: a report taken while
workers run may show a job's state change in one field and not yet in another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queuectl.domain.clock import Instant
from queuectl.domain.errors import InvalidConfig
from queuectl.domain.models import JobState, QueueLimit, Schedule, WorkerInfo
from queuectl.domain.settings import RETENTION
from queuectl.host.control import worker_state
from queuectl.host.liveness import heartbeat_age


@dataclass(frozen=True)
class WorkerStatus:
    """A registered worker as a report shows it.

    `state` is "running", "draining", "stale" or "dead" (queuectl.host.control.worker_state);
    `heartbeat_age` is seconds since its last heartbeat (queuectl.host.liveness.heartbeat_age),
    both at the snapshot's `now`.
    """

    info: WorkerInfo
    state: str
    heartbeat_age: float


@dataclass(frozen=True)
class Snapshot:
    """The queue's state at `now`, as the reports show it.

    - `now`: when it was read, on the store's clocks (wall: Unix seconds; monotonic; clock domain).
    - `counts`: {queue: {state: jobs}} for every queue that has jobs, each with every JobState
      in JobState's order (zeros included).
    - `runs`: {queue: {outcome: runs}}: runs that ended, kept when retention deletes the jobs;
      outcomes with no run left out.
    - `paused`: {queue: paused since, Unix seconds} of the paused queues, by name.
    - `oldest_ready`: {queue: seconds the oldest ready job has waited since it was due} of the
      queues that have a ready job (paused ones included), by name.
    - `workers`: every registered worker, by name.
    - `settings`: every setting's value in force by canonical key (durations in seconds, None for
      forever); the defaults where a stored value is broken, so that reports still report.
    - `limits`: {queue: QueueLimit} of the limited queues, by name.
    - `schedules`: every Schedule, by name.
    """

    now: Instant
    counts: dict[str, dict[str, int]]
    runs: dict[str, dict[str, int]]
    paused: dict[str, float]
    oldest_ready: dict[str, float]
    workers: tuple[WorkerStatus, ...]
    settings: dict[str, Any]
    limits: dict[str, QueueLimit]
    schedules: tuple[Schedule, ...]

    @property
    def totals(self) -> dict[str, int]:
        """{state: jobs} over every queue, each JobState in order."""
        return {s.value: sum(per[s.value] for per in self.counts.values()) for s in JobState}

    @property
    def queues(self) -> dict[str, dict[str, int]]:
        """{queue: {state: jobs}} of every queue that has jobs, is paused or is limited, by name (zeros for one
        without jobs: a queue paused or limited before its first job is still one to see and resume)."""
        zero = dict.fromkeys((s.value for s in JobState), 0)
        return {q: self.counts.get(q, zero) for q in sorted({*self.counts, *self.paused, *self.limits})}

    @property
    def retention(self) -> dict[str, float | None]:
        """{completed, cancelled, dead: seconds such jobs are kept; history: seconds the activity history's minutes
        are kept} (None: forever) (the keep-* settings)."""
        return {**{state: self.settings[key] for state, key in RETENTION.items()},
                "history": self.settings["keep-history"]}


def take(store) -> Snapshot:
    """Read the snapshot of `store` (a queuectl.store.SqlStore) now; raises what the store's reads raise.

    The workers are read before `now`, so that no heartbeat age comes out negative.
    """
    try:
        settings = store.settings()
    except InvalidConfig:
        settings = store.defaults
    counts = {q: {s.value: per.get(s.value, 0) for s in JobState} for q, per in store.counts().items()}
    runs = store.run_counts()
    paused = store.paused_queues()
    workers = store.workers()
    now = store.now()
    judged = tuple(WorkerStatus(w, worker_state(w, now, settings["stale-after"]), heartbeat_age(w, now))
                   for w in workers)
    limits = {q.queue: q for q in store.queue_limits()}
    return Snapshot(now, counts, runs, paused, store.oldest_ready(now), judged, settings, limits,
                    tuple(store.schedules()))
