"""The store's interface: what the commands and the workers may call, on either engine, by caller.

`CommandStore` is what the commands call (queuectl.api), `WorkerStore` what a worker calls
(queuectl.worker), `Shared` what both do; `Store` is all of it. Both engines (queuectl.store.sqlite, queuectl.store.postgres, sharing queuectl.store.sql)
implement all of it, and their docstrings give each rule in full. Times passed in (`now`)
are queuectl.domain.clock.Instant readings from `now()` (or bare Unix seconds, which schedule on
the wall clock alone); every call may raise DatabaseUnavailable (the database cannot be
reached, is locked for the whole busy timeout, or its disk is full) or DatabaseError.
Anything else a SqlStore has is the engines' own: only their own tests (tests/unit/test_store_sqlite.py,
test_postgres.py) and support.backdoor reach it.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from queuectl.domain.clock import Instant
from queuectl.domain.jobspec import NewJob
from queuectl.domain.models import Job, JobState, QueueLimit, Schedule, StoppedWorker, WorkerInfo
from queuectl.store.activity import ActivityRow
from queuectl.store.jobfilter import Attempt, Dependencies, JobFilter
from queuectl.store.base import CancelResult, Enqueued, Exchanged, FollowedOutput, JobProcess
from queuectl.store.request import Exchange


class Shared(Protocol):
    """What both callers use: the clocks, the settings, a job, the workers, and purge (commands' and retention's)."""

    def clock(self) -> float:
        """The wall clock the database's times are on, Unix seconds (the server's on PostgreSQL)."""

    def now(self) -> Instant:
        """The store's clock and this process's monotonic clock, read together: the `now` to pass in."""

    def settings(self) -> dict[str, Any]:
        """Every setting in force, by canonical key (queuectl.domain.settings); raises InvalidConfig for a bad stored one."""

    def describe(self) -> str:
        """The database as it may be shown to a user (never a password)."""

    def close(self) -> None:
        """Close the connections."""

    def get_job(self, job_id: str, output: bool = False) -> Job:
        """One job (with its last run's output if `output`); raises NotFound."""

    def workers(self) -> list[WorkerInfo]:
        """The registered workers, by name, each with the ids of the jobs it holds."""

    def worker_by_name(self, name: str) -> WorkerInfo | None:
        """The registered worker called `name`."""

    def purge(self, older_than: dict[str, float], now: Instant | float, queue: str | None = None,
              limit: int = ...) -> int:
        """Delete up to `limit` finished jobs older than their state's age (seconds); return how many."""


class CommandStore(Shared, Protocol):
    """What the commands call (queuectl.api, and the CLI through it): jobs, queues, schedules, limits,
    settings and counts."""

    def can_write(self) -> str | None:
        """None if this user may change jobs and queues, else why not (a read-only file, a role without UPDATE)."""

    def enqueue(self, jobs: Sequence[NewJob], now: Instant | float) -> list[Enqueued]:
        """Insert jobs all or none (a job whose key is held adds nothing) and wake the workers; return what
        became of each. Raises DuplicateJob."""

    def jobs_by_id(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """The jobs of `job_ids` that exist, by id (without output)."""

    def read_output(self, job_id: str, attempt: int | None,
                    positions: tuple[int, int]) -> tuple[Job, FollowedOutput | None]:
        """The job and its stored output past `positions` (bytes of stdout, stderr) of `attempt`; raises NotFound."""

    def stopped_workers(self, since: float, limit: int = 20) -> list[StoppedWorker]:
        """Up to `limit` workers that ended since `since` (Unix seconds), newest first."""

    def held_keys(self, limit: int = 100) -> tuple[list[tuple[str, str, JobState]], int]:
        """([(key, job id, state)] of up to `limit` held idempotency keys, by key; how many are held in all)."""

    def list_jobs(self, state: JobState | None = None, queue: str | None = None, limit: int = 100) -> list[Job]:
        """Up to `limit` jobs, newest first."""

    def find_jobs(self, filter: JobFilter, before_seq: int | None = None, limit: int = 50) -> list[Job]:
        """Up to `limit` jobs that `filter` matches, newest first, with seq below `before_seq` when given (keyset
        pages: pass the last job's seq), each with its `after`. A text filter scans (queuectl.store.search)."""

    def count_jobs(self, filter: JobFilter, cap: int = 10_000) -> int:
        """How many jobs `filter` matches, counting at most `cap` + 1: a result above `cap` means more."""

    def dependencies(self, job_id: str) -> Dependencies:
        """The jobs `job_id` waits for and those waiting for it (100 each at most, oldest first, with their states
        and whether there are more); raises NotFound."""

    def job_attempts(self, job_id: str, limit: int | None = None) -> list[Attempt]:
        """The newest `limit` (None: 100) attempts of `job_id` that ended without completing, oldest first; raises
        NotFound."""

    def counts(self) -> dict[str, dict[str, int]]:
        """{queue: {state: jobs}}, zero counts left out."""

    def run_counts(self) -> dict[str, dict[str, int]]:
        """{queue: {outcome: runs that ended so}} (retention does not lower them)."""

    def oldest_ready(self, now: Instant | float) -> dict[str, float]:
        """{queue: seconds its oldest ready job has waited since it was due}."""

    def set_setting(self, key: str, raw: Any) -> Any:
        """Validate and store one setting; return its typed value. Raises InvalidInput."""

    def cancel(self, job_ids: Sequence[str], now: Instant | float) -> list[CancelResult]:
        """Cancel jobs by id (a processing job's worker is asked to stop it); what happened to each."""

    def retry(self, job_ids: Sequence[str], now: Instant | float,
              states: Sequence[JobState] = (JobState.DEAD, JobState.CANCELLED)) -> list[JobState]:
        """Move dead or cancelled jobs back to pending (blocked, with dependencies to wait for), all or none;
        return their new states; raises NotFound or Conflict."""

    def dlq_retry(self, job_ids: Sequence[str], now: Instant | float) -> list[JobState]:
        """`retry` for dead jobs alone (the dead letter queue)."""

    def set_paused(self, queues: Sequence[str], paused: bool, now: Instant | float) -> list[bool]:
        """Pause or resume queues; for each, whether it changed."""

    def paused_queues(self) -> dict[str, float]:
        """{queue: paused since, Unix seconds}."""

    def add_schedule(self, name: str, rule, template: dict, overlap: str, now: Instant | float,
                     replace: bool = False) -> Schedule:
        """Add (or with `replace` replace) a schedule; return it. Raises Conflict for a name taken."""

    def schedules(self, name: str | None = None) -> list[Schedule]:
        """Every schedule (or only the one named `name`), by name, with its last run's state."""

    def remove_schedules(self, names: Sequence[str]) -> list[bool]:
        """Remove schedules; for each, whether it existed."""

    def set_schedules_paused(self, names: Sequence[str], paused: bool, now: Instant | float) -> list[bool | None]:
        """Pause or resume schedules; for each, whether it changed (None: no such schedule)."""

    def set_limit(self, queue: str, now: Instant | float, concurrency=..., rate=...) -> QueueLimit:
        """Set or clear a queue's concurrency and rate limits (queuectl.store.limits); return them."""

    def queue_limits(self) -> list[QueueLimit]:
        """Every queue's limits, by queue."""

    def activity(self, since: float, until: float, queue: str | None = None, step: int = 60) -> list[ActivityRow]:
        """Each queue's activity per `step` seconds (whole minutes), minutes beginning in [since, until) (Unix
        seconds), oldest first."""

    def activity_totals(self) -> dict[str, ActivityRow]:
        """{queue: its activity summed since the history began} (retention does not lower it)."""

    def count_purgeable(self, older_than: dict[str, float], now: Instant | float, queue: str | None = None) -> int:
        """How many jobs `purge` would delete in all."""

    def compact(self) -> str | None:
        """Give all free space back now (SQLite; nothing on PostgreSQL); a note for the user, or None."""


class WorkerStore(Shared, Protocol):
    """What a worker calls (queuectl.worker): its registration and heartbeat, the exchange, its duties'
    recovery, leases and schedules, its wake-ups, and when a rate limit next frees a place."""

    def register_worker(self, info: dict[str, Any], now: Instant | float, replace: int | None = None,
                        config: dict[str, Any] | None = None,
                        replace_seen: tuple | None = None) -> tuple[int, list[tuple[str, JobState]]]:
        """Register a worker incarnation (recovering a dead predecessor's jobs); (its id, recovered jobs)."""

    def heartbeat(self, worker_id: int, now: Instant | float) -> bool:
        """Record a heartbeat; False if the registration is gone (the worker was declared dead)."""

    def mark_draining(self, worker_id: int, now: Instant | float) -> None:
        """Record that the worker drains."""

    def deregister(self, worker_id: int, ended: str = "drained", now: Instant | float | None = None) -> None:
        """Remove the registration (a clean stop: drained, forced or burst), keeping that it ended for `status`."""

    def exchange(self, worker_id: int, ex: Exchange, queues: Sequence[str], now: Instant | float,
                 config: dict[str, Any] | None = None) -> Exchanged:
        """Record `ex` and claim up to `ex.claim` jobs in one transaction: (ended jobs' states, claimed jobs,
        the limited queues the claim saw or None). Raises WorkerGone."""

    def fire_schedules(self, now: Instant | float) -> tuple[list, float | None]:
        """Fire the schedules' due slots, each once across every worker; ([Fired], the next slot or None)."""

    def cancel_requests(self, worker_id: int) -> list[str]:
        """Ids of the worker's jobs whose cancel was requested."""

    def has_work(self, queues: Sequence[str], now: Instant | float) -> bool:
        """True if a job of `queues` is ready or waits for a retry (for --burst)."""

    def worker_jobs(self, worker_id: int) -> list[JobProcess]:
        """The jobs a worker holds, with where they run (for recovery)."""

    def orphaned_jobs(self) -> list[JobProcess]:
        """Processing jobs whose worker's registration is gone."""

    def recover(self, worker_id: int | None, seen: tuple | None, now: Instant | float,
                config: dict[str, Any] | None = None) -> list[tuple[str, JobState]]:
        """Give back a lost worker's jobs, if it did not beat since `seen`; [(job id, new state)]."""

    def take_lease(self, name: str, holder: int, now: Instant | float, ttl: float) -> bool:
        """Take or renew a lease for `ttl` seconds (work one worker at a time does); False if another holds it."""

    def purge_history(self, before: float | None, hours_before: float | None = None, limit: int = ...) -> int:
        """Fold about `limit` rows of activity history: older than `before` (Unix seconds) into each queue's totals,
        minutes before `hours_before`'s hour into their hours; return how many rows it deleted."""

    def maintain(self, worker_id: int) -> None:
        """Housekeeping at each heartbeat (PostgreSQL folds its counters; nothing on SQLite)."""

    def wakeup_source(self):
        """The worker's source of wake-ups from other hosts (fileno, take, broken), or None (SQLite:
        queuectl.host.wake's datagrams). Raises InvalidConfig behind a pooler that cannot carry them."""

    def rate_room_at(self, queues: Sequence[str], now: Instant | float) -> float | None:
        """When a rate limit that holds back a queue of `queues` next frees a place (Unix seconds on the store's
        clock; the window itself is read on the monotonic clock, see queuectl.store.timing), or None."""


class Store(CommandStore, WorkerStore, Protocol):
    """A queue in one database, as both engines implement it: every method either caller uses."""
