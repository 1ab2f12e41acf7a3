"""Waiting for jobs: to end (`queuectl wait`, `enqueue --wait`) or to stop running (`cancel --wait`).

A job has ended when it is completed, dead or cancelled (JobState.ended); it has stopped when it
is no longer processing (a cancelled job's worker has killed it, or it ended first). The store
is read every POLL (STOP_POLL) seconds, a few rows by primary key, on this host or any other on PostgreSQL: the
end of a job is noticed within POLL of its record. The reads ride out an outage of the
database (queuectl.api.outage).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from queuectl.errors import NotFound
from queuectl.models import Job, JobState
from queuectl.api.outage import Patience
from queuectl.store import CommandStore

#: Seconds between two reads of the waited jobs' states.
POLL = 0.1
#: Seconds between two reads of the jobs whose stop `cancel --wait` waits for.
STOP_POLL = 0.05


def wait_for_end(store: CommandStore, job_ids: Sequence[str], patience: Patience, timeout: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[dict[str, Job], list[str]]:
    """Wait until every job of `job_ids` has ended, or `timeout` seconds (None: no limit) have passed.

    Returns (the jobs as last read, by id; the ids of those that had not ended when the time
    ran out, empty if all ended). Ids that name no job must be left out by the caller (they
    would never end); one deleted while waited for counts as ended as it was last read. Reads
    go through `patience` (queuectl.api.outage), which rides out an outage of the database and
    raises DatabaseUnavailable when it gives up.
    """
    return wait_until(store, job_ids, lambda job: job.state.ended, patience, timeout, sleep=sleep)


def wait_for_stop(store: CommandStore, job_ids: Sequence[str], patience: Patience, timeout: float | None = None,
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, Job]:
    """Wait until no job of `job_ids` is processing any more, or `timeout` seconds have passed; return the
    jobs as last read, by id (some may still be processing). Raises NotFound for a job gone meanwhile,
    DatabaseUnavailable as wait_for_end does."""
    found, _ = wait_until(store, job_ids, lambda job: job.state != JobState.PROCESSING, patience, timeout,
                          STOP_POLL, sleep)
    missing = [j for j in job_ids if j not in found]
    if missing:
        raise NotFound(f"no job with id {missing[0]!r}")
    return found


def wait_until(store: CommandStore, job_ids: Sequence[str], settled: Callable[[Job], bool], patience: Patience,
               timeout: float | None = None, poll: float = POLL,
               sleep: Callable[[float], None] = time.sleep) -> tuple[dict[str, Job], list[str]]:
    """Read the jobs of `job_ids` every `poll` seconds until `settled(job)` holds for each, or `timeout`
    seconds (None: no limit) have passed; return as wait_for_end does (which is this with "has ended").

    A job that does not exist (any more) is not waited for; the caller finds it missing from
    the jobs returned. Raises DatabaseUnavailable when `patience` gives up on an outage (it may
    outlast the timeout by one read), any other store error at once.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    jobs: dict[str, Job] = {}
    waiting = list(dict.fromkeys(job_ids))
    while True:
        jobs.update(patience.read(lambda: store.jobs_by_id(waiting), deadline))
        waiting = [j for j in waiting if j in jobs and not settled(jobs[j])]
        if not waiting:
            return jobs, []
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return jobs, waiting
        sleep(poll if left is None else min(poll, left))


@dataclass(frozen=True)
class Waited:
    """What a wait saw: the jobs as last read by id, the ids that name no job (nothing is waited for
    then), and those that had not ended when the timeout passed (`late`)."""

    jobs: dict = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list:
        """The jobs waited for that ended without completing, in the order asked."""
        return [j for j in self.jobs.values() if j.state != JobState.COMPLETED]


#: The exit status of a wait for a job whose last attempt timed out: timeout(1)'s.
EXIT_TIMEOUT = 124


def exit_status(job: Job) -> int:
    """The exit status `enqueue --wait` gives for an ended job, as if its command had run here.

    0 when it completed; when it ended otherwise, its last attempt's exit code if it had one
    (a command that exits 3 gives 3), EXIT_TIMEOUT if that attempt timed out, else 1
    (cancelled, killed by a signal, could not start, its worker lost).
    """
    if job.state == JobState.COMPLETED:
        return 0
    if (job.last_error or "").startswith("timed out after"):
        return EXIT_TIMEOUT
    if job.exit_code:
        return job.exit_code
    return 1
