"""Waiting for jobs to end: what `queuectl wait` (and `enqueue --wait`) block on.

A job has ended when it is completed, dead or cancelled (JobState.ended). The store is read
every POLL seconds, a few rows by primary key, on this host or any other on PostgreSQL: the
end of a job is noticed within POLL of its record.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from queuectl.models import Job, JobState
from queuectl.store import Store

#: Seconds between two reads of the waited jobs' states.
POLL = 0.1


def wait_for_end(store: Store, job_ids: Sequence[str], timeout: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[dict[str, Job], list[str]]:
    """Wait until every job of `job_ids` has ended, or `timeout` seconds (None: no limit) have passed.

    Returns (the jobs as last read, by id; the ids of those that had not ended when the time
    ran out, empty if all ended). Ids that name no job must be left out by the caller (they
    would never end); one deleted while waited for counts as ended as it was last read.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    jobs: dict[str, Job] = {}
    waiting = list(dict.fromkeys(job_ids))
    while True:
        jobs.update(store.jobs_by_id(waiting))
        waiting = [j for j in waiting if j in jobs and not jobs[j].state.ended]
        if not waiting:
            return jobs, []
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return jobs, waiting
        sleep(POLL if left is None else min(POLL, left))


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
