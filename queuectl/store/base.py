"""What every store shares: the records it exchanges with the worker and the CLI, and the queue's rules.

Records are NamedTuples, as in queuectl.domain.models: immutable, and cheap to define, which every
command's start-up does (a frozen dataclass costs about 0.7 ms to define, a NamedTuple 0.15).

A store is the only place that knows its database. The worker and the CLI call the
methods of queuectl.store.sql.SqlStore, which both engines (sqlite.py, postgres.py)
subclass; the rules here (retry or dead after a failure, backoff, what a cancel does,
due times on the monotonic clock) hold on every backend.
"""

from typing import NamedTuple

from queuectl.domain.backoff import backoff_delay, retry_limit
from queuectl.domain.clock import Instant
from queuectl.domain.errors import Conflict, NotFound
from queuectl.domain.models import JobState

#: Jobs deleted per retention transaction: short write transactions (River deletes 10,000 with
#: pauses, Solid Queue 500); each also frees the jobs' output.
PURGE_BATCH = 1000
#: Minutes of activity history (rows) deleted per retention transaction, about (queuectl.store.activity.purge).
HISTORY_BATCH = 1000
#: Activity history is kept as minutes for a day (seconds); older minutes are rolled up into their hour's row (the
#: row of the hour's first minute), so that a week's chart reads hours, not minutes (queuectl.store.activity.purge).
MINUTES_KEPT = 86400


class WorkerGone(Conflict):
    """The calling worker's registration is gone: another worker declared it dead and took its jobs."""


class DuplicateJob(Conflict):
    """A job id is already in the queue (or twice in one batch). `job_id` names it."""

    def __init__(self, job_id: str, index: int = 0):
        super().__init__(f"a job with id {job_id!r} already exists")
        self.job_id = job_id
        self.index = index  # position in the batch of the first job that clashes


class UnknownDependency(NotFound):
    """A job's `after` names a job that does not exist. `index` is the job's position in the batch."""

    def __init__(self, job_id: str, dependency: str, index: int = 0):
        super().__init__(f"job {job_id} is after {dependency!r}, which is no job; nothing was enqueued")
        self.index = index


class FollowedOutput(NamedTuple):
    """What `SqlStore.read_output` read of a job's stored output: the bytes past those asked for, of
    attempt `attempt` (None: a record of before queuectl kept attempts); the other fields as in
    queuectl.store.request.LiveOutput."""

    stdout: bytes
    stderr: bytes
    stdout_from: int
    stderr_from: int
    written: tuple[int, int]
    attempt: int | None


class Exchanged(NamedTuple):
    """What an exchange did: the ended jobs' new states, in the order of Exchange.ended (None for a job the
    worker no longer owns); the claimed jobs, in claim order; `limited`, the limited queues
    (queuectl.store.limits) among those the claim could take from, as it saw them, or None when no claim
    ran (none asked, or nothing was ready); and `retry_in`, the backoff the store chose for each job it
    recorded failed (job id -> seconds until its retry, after_failure's rule), or None when none failed.
    A worker claims again at once when a job of a limited queue ends, rather than at its next poll (the
    place it held is free)."""

    states: list
    jobs: list
    limited: frozenset[str] | None = None
    retry_in: dict[str, float] | None = None


class Enqueued(NamedTuple):
    """What `enqueue` did with one job: added it (`held` None), or added nothing because its key is
    held by the job `id`, which has not ended and is in state `held`. `cancelled` is the last error
    of a job added cancelled, as one of its dependencies had ended dead or cancelled."""

    id: str
    held: JobState | None = None
    cancelled: str | None = None  # added, and cancelled at once: this dependency ended dead or cancelled


class CancelResult(NamedTuple):
    """What `cancel` did to one job: `result` is "cancelled" (at once), "requested" (its worker
    stops it) or "error" (`message` says why). `state` is the job's state before (None: no
    such job); `worker` names a processing job's worker."""

    job_id: str
    state: JobState | None
    result: str
    message: str | None = None
    worker: str | None = None


class JobProcess(NamedTuple):
    """A processing job with where it runs: what a recovery needs to kill it first.

    `host`, `boot_id` and `worker_pid` are its worker's; None when the worker's registration is gone.
    """

    job_id: str
    worker_id: int | None
    pgid: int | None
    pgid_start: int | None
    host: str | None
    boot_id: str | None
    pid_ns: str | None = None
    queue: str = "default"
    attempts: int = 0  # attempts counted, this one included once its start is recorded
    uid: int | None = None  # its worker's effective uid
    started: bool = True  # False: claimed and its start never recorded (its run would be attempt attempts + 1)
    worker_pid: int | None = None  # its worker's pid, as it registered (in its jobs' QUEUECTL_WORKER_PID)


def due_on_monotonic(now: Instant, delay: float | None) -> tuple[str | None, float | None]:
    """Return (due_boot, due_mono) for a wait of `delay` seconds from `now`; Nones without a monotonic reading."""
    if delay is None or now.mono is None or not now.domain:
        return None, None
    return now.domain, now.mono + delay


def schedule(now: Instant, delay: float) -> tuple[float, float, str | None, float | None]:
    """Return (run_at, delay, due_boot, due_mono) for a job due `delay` seconds after `now`."""
    return (now.wall + delay, delay, *due_on_monotonic(now, delay))


def cancel_wins(state: JobState, cancel_requested_at: float | None) -> JobState:
    """What a job becomes next (`state`: given back, retried, dead), unless its cancel was requested: then
    cancelled, never retried, never dead. core.RELEASED is the same rule in SQL."""
    return state if cancel_requested_at is None else JobState.CANCELLED


def after_failure(attempts: int, max_retries: int | None, now: Instant, config: dict,
                   cancel_requested_at: float | None = None) -> tuple[JobState, tuple]:
    """Return (state, schedule values: run_at, delay, due_boot, due_mono) after a failed attempt: a retry
    after its backoff (queuectl.domain.backoff), or dead (all four None); cancelled if its cancel was requested
    (cancel_wins).
    """
    state = cancel_wins(JobState.DEAD if attempts > retry_limit(max_retries, config) else JobState.FAILED,
                        cancel_requested_at)
    if state != JobState.FAILED:
        return state, (None, None, None, None)
    return state, schedule(now, backoff_delay(attempts, config["backoff-base"], config["backoff-max"]))
