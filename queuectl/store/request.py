"""A worker's side of an exchange with the store: Exchange, and the parts it carries (Running, LiveOutput, Outcome).

Only workers build these (queuectl.worker); the store reads them in SqlStore.exchange. They live
apart from queuectl.store.base so that commands, which never exchange, do not define them at
start-up. Records are NamedTuples, as in queuectl.domain.models.
"""

from typing import NamedTuple, Sequence


class Outcome(NamedTuple):
    """How one run of a job ended, as the worker reports it to `finish`.

    `ok` is True for exit status 0; `error` says why it failed otherwise; output is raw bytes.
    `ended_at` is when the job ended, in Unix seconds on the store's clock (its finished_at,
    also when the result is written later, after a database outage); None: when written.
    `started_at` (Unix seconds, the store's clock) is given when the job's start was not yet
    recorded (it started and ended between two exchanges): the record then counts its attempt.
    """

    job_id: str
    ok: bool
    exit_code: int | None
    error: str | None
    stdout: bytes = b""
    stderr: bytes = b""
    ended_at: float | None = None
    started_at: float | None = None
    written: tuple[int, int] | None = None  # bytes it wrote in all to stdout, stderr (None: as long as kept)


class LiveOutput(NamedTuple):
    """Output running job `job_id` wrote since it was last recorded (for `logs --follow`), as raw bytes:
    `stdout` holds its stdout's bytes from byte `stdout_from` (counted from the start of the run) on,
    `stderr` likewise; `written` is how many bytes each stream has had in all (stdout, stderr). A
    record sent again (its commit unknown) appends nothing twice (queuectl.store.exchange._record_output)."""

    stdout: bytes
    stderr: bytes
    stdout_from: int
    stderr_from: int
    written: tuple[int, int]
    job_id: str


class Running(NamedTuple):
    """What the store learns of a job still running: its start and/or its process group.

    `started_at` (Unix seconds, the store's clock): the job started then and its start is new
    (the record counts its attempt); None: recorded before. `pgid` and `pgid_start` (the group
    leader's start time, clock ticks since boot): its process group, None if not recorded now.
    """

    job_id: str
    started_at: float | None = None
    pgid: int | None = None
    pgid_start: int | None = None


class Exchange(NamedTuple):
    """All a worker records and asks for in one exchange with the store: one transaction.

    Applied in this order: `running` (new starts and process groups of jobs still running),
    `output` (what jobs still running wrote since it was last recorded),
    `ended` (Outcome of each job that ended), `requeue` (ids of running jobs stopped by a
    forced stop: back to pending, their attempt given back), `release` (ids of jobs claimed
    but never started: back to pending, or cancelled if a cancel was requested, with no attempt
    counted), then a claim of up to `claim` ready jobs.
    """

    running: Sequence[Running] = ()
    ended: Sequence[Outcome] = ()
    requeue: Sequence[str] = ()
    release: Sequence[str] = ()
    claim: int = 0
    output: Sequence[LiveOutput] = ()
    #: How many of `claim` would start at once (the worker's free slots; None: all): jobs of limited
    #: queues are claimed for these alone (queuectl.store.limits).
    free: int | None = None

    def writes(self) -> bool:
        """True if there is anything to record (not a claim alone)."""
        return bool(self.running or self.ended or self.requeue or self.release or self.output)
