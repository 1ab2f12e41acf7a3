"""The store's exchange in the shapes tests need: claim, finish and requeue one at a time.

A worker records starts, ends and claims together in one `Store.exchange`; a test often
wants one step alone. `claim` here also records the claimed jobs as started (their attempt
counted), as a worker that started them at once would.
"""

from __future__ import annotations

from typing import Sequence

from queuectl.clock import instant
from queuectl.models import Job, JobState
from queuectl.store import Exchange, Outcome, Running


def claim(store, worker_id: int, queues: Sequence[str], limit: int, now) -> list[Job]:
    """Claim up to `limit` ready jobs of `queues` for `worker_id` and record them started at `now`."""
    _, jobs, _ = store.exchange(worker_id, Exchange(claim=limit), queues, now)
    if jobs:
        wall = instant(now).wall
        store.exchange(worker_id, Exchange(running=[Running(j.id, wall) for j in jobs]), queues, now)
    return [j._replace(attempts=j.attempts + 1) for j in jobs]


def finish(store, worker_id: int, outcomes: Sequence[Outcome], now) -> list[JobState | None]:
    """Record how started jobs ended; return each one's new state (None: not this worker's)."""
    return store.exchange(worker_id, Exchange(ended=outcomes), (), now)[0]


def requeue(store, worker_id: int, job_ids: Sequence[str], now) -> int:
    """Put this worker's processing jobs back to pending, their attempt given back; return how many."""
    mine = {j for j in job_ids if _owned(store, worker_id, j)}
    store.exchange(worker_id, Exchange(requeue=list(job_ids)), (), now)
    return len(mine)


def record_processes(store, worker_id: int, groups) -> None:
    """Record each (job id, pgid, leader start time) of running jobs."""
    store.exchange(worker_id, Exchange(running=[Running(j, None, pgid, start) for j, pgid, start in groups]), (),
                   store.now())


def _owned(store, worker_id: int, job_id: str) -> bool:
    return store.c.execute("SELECT 1 FROM jobs WHERE id = ? AND worker_id = ? AND state = 'processing'",
                           (job_id, worker_id)).fetchone() is not None
