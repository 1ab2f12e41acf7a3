"""A worker's steps, through the interface: register, claim, start, finish and requeue one step at a time.

A worker records starts, ends and claims together in one `WorkerStore.exchange` (queuectl.worker.exchange);
a test that only needs a job in a state (claimed, started, finished) takes these steps instead. They use
nothing but `WorkerStore.register_worker`, `WorkerStore.exchange` and `CommandStore.get_job`, and a job's
enqueue through `CommandStore.enqueue` (`add`): no connection, no SQL. A test of the exchange itself calls
`store.exchange` as the worker does.
"""

from __future__ import annotations

import json
from typing import Sequence

from queuectl.domain.clock import instant
from queuectl.domain.jobspec import NewJob, parse_job
from queuectl.domain.models import Job, JobState
from queuectl.store.request import Exchange, Outcome, Running

#: The tests' wall clock, Unix seconds: every time they pass in is NOW plus or minus seconds.
NOW = 1_000_000.0


def new_job(now=NOW, **fields) -> NewJob:
    """A job of `fields` (the enqueue JSON's; command "true" unless given) as it is enqueued at `now`."""
    return parse_job(json.dumps({"command": "true", **fields}), instant(now).wall)


def add(store, now=NOW, **fields) -> str:
    """Enqueue one job of `fields` (the enqueue JSON's; command "true" unless given) at `now`; return its id."""
    job = new_job(now, **fields)
    store.enqueue([job], now)
    return job.id


def register(store, name="w1", now=NOW, **info) -> int:
    """Register a worker called `name` on host "testhost" (one slot, every queue, unless `info` says); return its id."""
    info = {"name": name, "host": "testhost", "boot_id": "b", "pid": 1, "pid_start": 1, "slots": 1,
            "queues": [], "unit": None, **info}
    return store.register_worker(info, now)[0]


def ok(job_id: str) -> Outcome:
    """A run of `job_id` that exited 0, having written b"out" and b"err"."""
    return Outcome(job_id, True, 0, None, b"out", b"err")


def bad(job_id: str, code: int = 1) -> Outcome:
    """A run of `job_id` that exited `code`, having written b"boom" on stderr."""
    return Outcome(job_id, False, code, f"exit code {code}", b"", b"boom")


def claim(store, worker_id: int, queues: Sequence[str], limit: int, now) -> list[Job]:
    """Claim up to `limit` ready jobs of `queues` for `worker_id` and record them started at `now` (their attempt
    counted), as a worker that starts them at once does; return them as started."""
    jobs = store.exchange(worker_id, Exchange(claim=limit), queues, now).jobs
    if jobs:
        start(store, worker_id, [j.id for j in jobs], now)
    return [j._replace(attempts=j.attempts + 1) for j in jobs]


def start(store, worker_id: int, job_ids: Sequence[str], now) -> None:
    """Record the claimed jobs `job_ids` of `worker_id` started at `now` (each counts its attempt)."""
    wall = instant(now).wall
    store.exchange(worker_id, Exchange(running=[Running(j, wall) for j in job_ids]), (), now)


def finish(store, worker_id: int, outcomes: Sequence[Outcome], now) -> list[JobState | None]:
    """Record how started jobs ended; return each one's new state (None: not this worker's)."""
    return store.exchange(worker_id, Exchange(ended=outcomes), (), now)[0]


def requeue(store, worker_id: int, job_ids: Sequence[str], now) -> int:
    """Put this worker's processing jobs back to pending, their attempt given back (a forced stop); return how
    many were this worker's."""
    mine = [j for j in job_ids if _held_by(store.get_job(j), worker_id)]
    store.exchange(worker_id, Exchange(requeue=list(job_ids)), (), now)
    return len(mine)


def _held_by(job: Job, worker_id: int) -> bool:
    return job.state == JobState.PROCESSING and job.worker_id == worker_id
