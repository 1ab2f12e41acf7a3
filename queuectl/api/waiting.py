"""Waiting for jobs: to end (`queuectl wait`, `enqueue --wait`: wait, wait_enqueued) or to stop running
(`cancel --wait`).

A job has ended when it is completed, dead or cancelled (JobState.ended); it has stopped when it
is no longer processing (a cancelled job's worker has killed it, or it ended first). The store
is read every POLL (STOP_POLL) seconds, a few rows by primary key, on this host or any other on PostgreSQL: the
end of a job is noticed within POLL of its record. The reads ride out an outage of the
database (queuectl.api.outage).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from queuectl.domain.errors import NotFound
from queuectl.domain.models import Job, JobState, printable
from queuectl.api.outage import Patience
from queuectl.domain.backoff import delay_text, retry_limit

if TYPE_CHECKING:  # the interface documents the store's type; no command needs it to run
    from queuectl.store.interface import CommandStore

#: Seconds between two reads of the waited jobs' states.
POLL = 0.1
#: Seconds between two reads of the jobs whose stop `cancel --wait` waits for.
STOP_POLL = 0.05


def wait(store: CommandStore, job_ids: Sequence[str], patience: Patience, timeout: float | None = None,
         note: Callable[[str], None] | None = None) -> Waited:
    """Wait until every job of `job_ids` has ended (completed, dead or cancelled), or `timeout` seconds passed.

    Ids that name no job are returned as `unknown` and nothing is waited for. Reads go through
    `patience` (queuectl.api.outage.Patience; DatabaseUnavailable when it gives up, which a
    `timeout` may bring forward). Jobs are read every POLL seconds. `note`, if given, gets a line
    for each attempt that ends failed meanwhile ("job j1: attempt 2 of 4 failed (exit code 3):
    retry in 4 s": Attempts).
    """
    job_ids = list(dict.fromkeys(job_ids))
    known = patience.read(lambda: store.jobs_by_id(job_ids), None if timeout is None else time.monotonic() + timeout)
    unknown = [job_id for job_id in job_ids if job_id not in known]
    if unknown:
        return Waited(unknown=unknown)
    jobs, late = wait_for_end(store, job_ids, patience, timeout, note=note)
    return Waited({j: jobs[j] for j in job_ids}, [], late)


def wait_enqueued(store: CommandStore, job_ids: Sequence[str], patience: Patience,
                  note: Callable[[str], None] | None = None) -> Waited:
    """Wait for the jobs of `job_ids`, just enqueued, to end (no timeout); return what the wait saw.

    A job deleted meanwhile (purged) is not waited for. Its `status` is the exit status `enqueue
    --wait` gives (Waited.status). Raises, and says attempts to `note`, as `wait` does.
    """
    job_ids = list(dict.fromkeys(job_ids))
    jobs, _ = wait_for_end(store, job_ids, patience, note=note)
    return Waited({j: jobs[j] for j in job_ids if j in jobs})


def wait_for_end(store: CommandStore, job_ids: Sequence[str], patience: Patience, timeout: float | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 note: Callable[[str], None] | None = None) -> tuple[dict[str, Job], list[str]]:
    """Wait until every job of `job_ids` has ended, or `timeout` seconds (None: no limit) have passed.

    Returns (the jobs as last read, by id; the ids of those that had not ended when the time
    ran out, empty if all ended). Ids that name no job must be left out by the caller (they
    would never end); one deleted while waited for counts as ended as it was last read. Reads
    go through `patience` (queuectl.api.outage), which rides out an outage of the database and
    raises DatabaseUnavailable when it gives up. `note`, if given, gets one line for each
    attempt that ends failed meanwhile (Attempts).
    """
    seen = None if note is None else Attempts(store, patience, note).seen
    return wait_until(store, job_ids, lambda job: job.state.ended, patience, timeout, sleep=sleep, seen=seen)


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
               timeout: float | None = None, poll: float = POLL, sleep: Callable[[float], None] = time.sleep,
               seen: Callable[[Job], None] | None = None) -> tuple[dict[str, Job], list[str]]:
    """Read the jobs of `job_ids` every `poll` seconds until `settled(job)` holds for each, or `timeout`
    seconds (None: no limit) have passed; return as wait_for_end does (which is this with "has ended").
    `seen`, if given, is called with each job read, in the order of `job_ids`.

    A job that does not exist (any more) is not waited for; the caller finds it missing from
    the jobs returned. Raises DatabaseUnavailable when `patience` gives up on an outage (it may
    outlast the timeout by one read), any other store error at once.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    jobs: dict[str, Job] = {}
    waiting = list(dict.fromkeys(job_ids))
    while True:
        read = patience.read(lambda: store.jobs_by_id(waiting), deadline)
        jobs.update(read)
        if seen is not None:
            for job_id in waiting:
                if job_id in read:
                    seen(read[job_id])
        waiting = [j for j in waiting if j in jobs and not settled(jobs[j])]
        if not waiting:
            return jobs, []
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return jobs, waiting
        sleep(poll if left is None else min(poll, left))


class Attempts:
    """Say each attempt of the jobs a wait reads that ends failed, one line each to `note` (a job's attempts,
    read every POLL, are lines in their order; none is said twice):

        job j1: attempt 2 of 4 failed (exit code 3): retry in 4 s
        job j1: attempt 4 of 4 failed (exit code 3): dead

    The retry's delay is the job's own (its run_at after its end's record); "of 4" counts its first run
    and its retries (its max_retries, else the max-retries setting, read once when first needed). An
    attempt whose failed state no read saw (its retry started within POLL) says "retried". The first
    read of a job says only a failure whose retry it is waiting for: an end that came before the wait
    is the final line's (the caller's), and the attempts before it are history. A job retried
    (`queuectl retry`, attempts back to 0) starts its count again. The error is escaped for the
    terminal (queuectl.domain.models.printable).
    """

    def __init__(self, store: CommandStore, patience: Patience, note: Callable[[str], None]):
        self.store, self.patience, self.note = store, patience, note
        self._said: dict[str, int] = {}  # job id -> the attempts whose end was said (or came before the wait)
        self._settings: dict | None = None

    def seen(self, job: Job) -> None:
        """Say the attempts of `job` (as just read) that ended failed since its last read."""
        ended = ended_attempts(job)
        said = self._said.get(job.id)
        if said is None or ended < said:
            said = ended - 1 if job.state == JobState.FAILED else ended
        for attempt in range(said + 1, ended + 1):
            self.note(attempt_line(job, attempt, self._runs(job), latest=attempt == ended))
        self._said[job.id] = ended

    def _runs(self, job: Job) -> int:
        """The most attempts `job` has: its first run and its retries."""
        if job.max_retries is None and self._settings is None:
            self._settings = self.patience.read(self.store.settings)
        return retry_limit(job.max_retries, self._settings or {}) + 1


def ended_attempts(job: Job) -> int:
    """How many of `job`'s counted attempts have ended: all of them, except one that runs now (its start recorded)
    or that completed. A cancelled job's last attempt, stopped by the cancel, is no failure: it counts as running."""
    running = job.state in (JobState.COMPLETED, JobState.CANCELLED) or (
        job.state == JobState.PROCESSING and job.started_at is not None)
    return max(job.attempts - running, 0)


def attempt_line(job: Job, attempt: int, runs: int, latest: bool) -> str:
    """The line that says attempt `attempt` (of `runs` at most) of `job` ended failed; `latest`: it is the
    job's latest ended attempt, whose error the record holds and whose outcome is its state."""
    line = f"job {job.id}: attempt {attempt} of {runs} failed"
    if latest and job.last_error:
        line += f" ({printable(job.last_error)})"
    if latest and job.state == JobState.FAILED:
        return f"{line}: retry in {delay_text(job.run_at - job.updated_at)}"
    if latest and job.state == JobState.DEAD:
        return f"{line}: dead"
    return f"{line}: retried"


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

    @property
    def status(self) -> int:
        """The exit status `enqueue --wait` gives: exit_status of the first job, in the order asked, that did not
        complete, else 0."""
        return next((code for code in map(exit_status, self.failed) if code != 0), 0)


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
