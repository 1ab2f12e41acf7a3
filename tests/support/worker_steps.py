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

from queuectl.domain.clock import Instant, instant
from queuectl.domain.jobspec import NewJob, parse_job
from queuectl.domain.models import Job, JobState
from queuectl.host import procs
from queuectl.store.request import Exchange, LiveOutput, Outcome, Running

#: The tests' wall clock, Unix seconds: every time they pass in is NOW plus or minus seconds.
NOW = 1_000_000.0
#: A clock domain: the monotonic clock of one boot (queuectl.domain.clock), a worker's that a test names.
A = "boot-a"


def at(wall: float) -> Instant:
    """The store's clock reading `wall`, its monotonic clock too (where only the wall clock matters)."""
    return Instant(wall, wall, "test-boot")


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


def started(store, job_id="a") -> int:
    """Register a worker that claims `job_id` (the next ready job) and records it running at NOW; return its id."""
    w = register(store)
    assert [j.id for j in claim(store, w, [], 1, NOW)] == [job_id]
    store.exchange(w, Exchange(running=[Running(job_id, NOW)]), [], NOW)
    return w


def record_output(store, worker, job_id, out: bytes, out_from: int, err: bytes = b"", err_from: int = 0):
    """Record live output as a worker does: `out` is stdout from byte `out_from` on."""
    store.exchange(worker, Exchange(output=[LiveOutput(out, err, out_from, err_from,
                                                       (out_from + len(out), err_from + len(err)), job_id=job_id)]),
                   [], NOW)


def run_one(store, worker, job_id, outcome=ok, now=NOW):
    """Claim exactly `job_id` (the only ready job) and record its end as `outcome`."""
    assert [j.id for j in claim(store, worker, [], 10, now)] == [job_id]
    finish(store, worker, [outcome(job_id)], now)


def ended(store, job_id: str, outcome) -> None:
    """Run `job_id` (the next ready job) to its end, as a worker of its own would record it: `outcome(job_id)` (ok
    or bad)."""
    w = register(store, f"w-{job_id}")
    assert [j.id for j in claim(store, w, [], 1, NOW)] == [job_id]
    finish(store, w, [outcome(job_id)], NOW)


def failed_once(store, now):
    """A job, "r", that failed its first attempt at `now` (backoff-base 2: its retry is due 2 s later); return the
    id of the worker that ran it."""
    add(store, id="r", max_retries=5, now=now)
    w = register(store, now=now)
    claim(store, w, [], 1, now)
    assert finish(store, w, [bad("r")], now) == [JobState.FAILED]
    return w


def is_ready(store, now) -> bool:
    """Whether a job is ready at `now` as a claim sees it: the queue latency (CommandStore.oldest_ready) reads
    the claims' due rule (queuectl.store.timing.due), without claiming."""
    return bool(store.oldest_ready(now))


def finished_jobs(store, specs):
    """Jobs finished at NOW: {id: (queue, "ok" | "fail" | "dead" | "cancel")}."""
    for job_id, (queue, how) in specs.items():
        add(store, id=job_id, queue=queue, max_retries=0 if how == "dead" else 3)
    w = register(store, slots=len(specs))
    claim(store, w, [], len(specs), NOW)
    store.cancel([j for j, (_, how) in specs.items() if how == "cancel"], NOW)
    finish(store, w, [ok(j) if how == "ok" else bad(j) for j, (_, how) in specs.items()], NOW)


def _held_by(job: Job, worker_id: int) -> bool:
    return job.state == JobState.PROCESSING and job.worker_id == worker_id


def local_worker(store, name: str, pid: int = 0) -> int:
    """Register a worker of this host (pid 0: no process of its own; kill_local does not ask)."""
    return register(store, name, host=procs.hostname(), boot_id=procs.boot_id(), pid_ns=procs.pid_namespace(),
                    pid=pid, pid_start=0)
