"""The core of the SQL store: what each engine supplies, and the statement pieces every concern shares.

SqlCore is the contract between the queue's operations (by concern: jobs, exchange, workers,
operator, schedules, limits, settings; queuectl.store.sql composes them into SqlStore) and
the two engines (queuectl.store.sqlite, queuectl.store.postgres), which supply the connection
and what differs between them: transactions, error mapping, index hints, row locks, claims and
counters. Statements use `?` placeholders (the PostgreSQL adapter turns them into `%s`) and SQL
that both engines accept; the fragments of the queue's rules are queuectl.store.fragments' and
queuectl.store.timing's, each written once.

Every state change is one statement or one write transaction, and every write that finishes a
job checks that the calling worker still owns it. The store knows nothing of processes or
signals; callers pass the time in (`now`: a queuectl.domain.clock.Instant from `store.now()`, or a bare
wall-clock reading in Unix seconds, which schedules on the wall clock alone).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Sequence

from queuectl.domain.clock import Instant, clock_domain
from queuectl.domain.models import Job
from queuectl.store import fragments
from queuectl.store.timing import clock_values, due, placeholders

#: The jobs table's columns that Job.from_row reads.
JOB_COLUMNS = (
    "seq, id, queue, command, state, priority, attempts, max_retries, timeout, cwd, run_at, "
    "created_at, updated_at, started_at, finished_at, worker_id, pgid, exit_code, last_error, key"
)
#: Due (queuectl.store.timing.due) with `?` placeholders; its parameters: due_params.
DUE, _DUE_SLOTS = placeholders(due())
#: Ready (fragments.ready) with `?` placeholders; its parameters are DUE's.
_READY_JOB = placeholders(fragments.ready())[0]
#: A job of the calling worker (parameters: job id, worker id).
OWNED = "WHERE id = ? AND worker_id = ? AND state = 'processing'"
#: A claimed job given back (unstarted, or stopped by a forced stop): pending again, or cancelled (its error
#: 'cancelled') if its cancel was requested, as base.cancel_wins says (parameter: finished_at for a cancelled one).
RELEASED = ("state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
            " finished_at = CASE WHEN cancel_requested_at IS NULL THEN finished_at ELSE ? END,"
            " last_error = CASE WHEN cancel_requested_at IS NULL THEN last_error ELSE 'cancelled' END,"
            " worker_id = NULL, pgid = NULL, pgid_start = NULL")
#: Marks a job's stored output as a run's that came before its current attempt count (a requeued run's,
#: whose attempt number the next run takes again; a retried job's), so that the next run's output
#: replaces it rather than being appended, and followers do not take it for that run's (parameter: seq).
OUTPUT_BEFORE = "UPDATE job_output SET attempt = 0 WHERE seq ="
#: Sets a job's due time from base.schedule's four values (a dead job's run_at is kept).
RESCHEDULE = "run_at = coalesce(?, run_at), delay = ?, due_boot = ?, due_mono = ?"


def claimed_jobs(rows) -> list[Job]:
    """Return jobs from claimed rows, in claim order (priority, then run_at, then enqueue order)."""
    return sorted((Job.from_row(r) for r in rows), key=lambda j: fragments.claim_key(j.priority, j.run_at, j.seq))


def queue_filter(where: str, params: list, queues: Sequence[str]) -> tuple[str, list]:
    """Return `where` and `params` narrowed to jobs of `queues` (empty: every queue)."""
    if queues:
        where += f" AND queue IN ({', '.join('?' * len(queues))})"
        params = [*params, *queues]
    return where, params


def due_params(now: Instant) -> list:
    """Return the parameters of DUE at `now`."""
    values = clock_values(now)
    return [values[slot] for slot in _DUE_SLOTS]


class SqlCore(ABC):
    """An engine: what the queue's operations need of a database, and what they share.

    The concern modules (queuectl.store.jobs, exchange, workers, operator, schedules, limits,
    settings, activity, search) are functions that take an engine as their first argument;
    queuectl.store.sql.SqlStore gathers them as its methods. An engine (SqliteStore,
    PostgresStore) sets `self.c` (a connection whose `execute(sql, params)` and `executemany` take
    `?` placeholders and return a cursor with rows addressable by index and by column name) and
    `self.defaults`, implements every abstract method below once, and sets the class attributes
    where its dialect differs.
    """

    #: The exception a unique or primary-key violation raises.
    UniqueViolation: type[Exception] = Exception
    #: Index hints after `FROM jobs` for ready-job and finished-job scans ("" where the planner needs none).
    READY_INDEX = ""
    FINISHED_INDEX = ""
    #: The index hint of per-queue reads of ready jobs (queuectl.store.limits; "" where the planner needs none).
    READY_QUEUE_INDEX = ""
    #: Row-lock clauses appended to a SELECT inside a write transaction ("" where a write
    #: transaction already excludes every other writer, as SQLite's BEGIN IMMEDIATE does).
    FOR_SHARE = ""
    FOR_UPDATE = ""
    #: FOR_UPDATE that passes over rows another transaction has locked.
    SKIP_LOCKED = ""
    #: Where the per-(queue, state) job counts and the per-(queue, outcome) run counts are read from.
    COUNTS_FROM = "job_counts"
    RUNS_FROM = "job_runs"
    #: The tables the activity history is read from (queuectl.store.activity; PostgreSQL adds its deltas).
    ACTIVITY_TABLES: tuple[str, ...] = ("activity",)
    #: Two byte strings joined, as a byte string ({0} then {1}).
    CONCAT = "({0} || {1})"
    #: The position of text {1} in text {0}, from 1 (0: not in it): a substring test without LIKE's wildcards.
    FIND = "instr({0}, {1})"
    #: A job's id as ordered for an id prefix's range (queuectl.store.search): byte order.
    ID_ORDER = "id"
    #: Expression {0} as a term no index serves, so that the planner takes another (SQLite's unary +); PostgreSQL's
    #: planner chooses by its statistics.
    NOT_INDEXED = "{0}"

    c: Any
    defaults: dict[str, Any]

    # -- what each engine supplies ------------------------------------------------------------

    @abstractmethod
    def _errors(self) -> AbstractContextManager[None]:
        """A context manager that turns the engine's errors into one-line queuectl errors (unique violations
        pass through)."""

    @abstractmethod
    def _write(self) -> AbstractContextManager[Any]:
        """A context manager that runs its block in one write transaction, giving the connection; it rolls
        back on any exception."""

    @abstractmethod
    def _claim_rows(self, c, worker_id: int, where: str, params: list, limit: int, now: Instant) -> list:
        """Move up to `limit` jobs matching `where` to processing for `worker_id`; return their rows."""

    @abstractmethod
    def _update_returning(self, c, sql: str, rows: list[tuple]) -> list:
        """Run `sql` (an UPDATE ... RETURNING of at most one row) once per parameter tuple of `rows`; return
        each run's row or None, in order (update_each, or the runs sent together)."""

    @abstractmethod
    def _notify(self, c) -> None:
        """Inside a write transaction: wake the workers once it commits, for jobs may be ready or cancels
        requested (never after a rollback). PostgreSQL NOTIFYs; SQLite pokes this host's workers."""

    @abstractmethod
    def describe(self) -> str:
        """The database as it may be shown to a user (never with a password)."""

    @abstractmethod
    def can_write(self) -> str | None:
        """Return None if this login may change jobs and queues, else why not."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""

    @abstractmethod
    def clock(self) -> float:
        """The wall clock this database's times are on, in Unix seconds (this host's on SQLite, the server's
        on PostgreSQL)."""

    @abstractmethod
    def wakeup_source(self):
        """Where wake-ups from other hosts arrive: an object with `fileno()` (readable when one came) and
        `take()` (consume them); None where the engine has none (SQLite: queuectl.host.wake pokes the worker)."""

    @abstractmethod
    def maintain(self, worker_id: int) -> None:
        """Housekeeping a worker does at each heartbeat (none on SQLite)."""

    @abstractmethod
    def compact(self) -> str | None:
        """Give all free space back to the filesystem now; return a line saying what was done, or None
        (PostgreSQL: nothing to do, its autovacuum makes freed space reusable by itself)."""

    # -- what every engine shares ---------------------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def now(self) -> Instant:
        """This process's clocks now: the store's wall clock, CLOCK_MONOTONIC and its domain."""
        return Instant(self.clock(), time.monotonic(), clock_domain())

    @staticmethod
    def _ready_filter(queues: Sequence[str], now: Instant) -> tuple[str, list]:
        """Return the WHERE of ready jobs (fragments.ready) in `queues` (empty: every queue) at `now`, and its
        parameters."""
        return queue_filter(_READY_JOB, due_params(now), queues)

    def _exists_ready(self, where: str, params: list) -> bool:
        with self._errors():
            return self.c.execute(f"SELECT EXISTS (SELECT 1 FROM jobs {self.READY_INDEX} WHERE {where})",
                                  params).fetchone()[0] == 1


def update_each(c, sql: str, rows: list[tuple]) -> list:
    """Run `sql` (an UPDATE ... RETURNING of at most one row) once per parameter tuple of `rows`, one round trip
    each; return each run's row or None (SqlCore._update_returning where an engine sends no batch)."""
    return [c.execute(sql, params).fetchone() for params in rows]
