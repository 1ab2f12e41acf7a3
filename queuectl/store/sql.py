"""The queue's operations on a SQL database, by concern, composed into SqlStore for both engines.

Each concern is a module of its own, its statements beside its rules (Python modules rather than .sql
files: statements are composed from the shared fragments and the engines' hints and locks):

- queuectl.store.jobs: enqueue (keys, dependencies) and the reads of jobs, their output and counts;
- queuectl.store.exchange: a worker's exchange (starts, output, ends, requeues, releases, the claim);
- queuectl.store.workers: registration, heartbeats, recovery of a dead worker's jobs, leases;
- queuectl.store.operator: retry, cancel, pause, purge;
- queuectl.store.activity: activity history (per queue and minute), its reads and its retention;
- queuectl.store.search: finding jobs by a filter (keyset pages, capped counts), a job's dependencies both ways;
- queuectl.store.schedules, queuectl.store.limits, queuectl.store.settings.

Each builds on queuectl.store.core (SqlCore: what an engine supplies, and the statement pieces all
share); the fragments of the queue's rules are queuectl.store.fragments' and queuectl.store.timing's.
SqliteStore (queuectl.store.sqlite) and PostgresStore (queuectl.store.postgres) subclass SqlStore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queuectl.store.base import HISTORY_BATCH
from queuectl.store.core import JOB_COLUMNS, SqlCore, claimed_jobs
from queuectl.store.exchange import ExchangeStore
from queuectl.store.jobs import JobStore
from queuectl.store.limits import LimitStore
from queuectl.store.operator import OperatorStore
from queuectl.store.schedules import ScheduleStore
from queuectl.store.settings import SettingsStore
from queuectl.store.workers import WorkerRegistry

if TYPE_CHECKING:
    from queuectl.domain.models import Job
    from queuectl.store.jobfilter import Attempt, Dependencies, JobFilter


class SqlStore(JobStore, ExchangeStore, WorkerRegistry, OperatorStore, ScheduleStore, LimitStore, SettingsStore):
    """The queue's operations on a SQL database (see the module); subclasses supply the engine (SqlCore)."""

    # Activity history: its module loads when first used, never on `queuectl enqueue`'s path.
    def activity(self, since: float, until: float, queue: str | None = None, step: int = 60) -> list:
        """Return each queue's activity per `step` seconds (whole minutes), minutes beginning in [since, until)
        (Unix seconds), oldest first (queuectl.store.activity.read)."""
        from queuectl.store import activity

        return activity.read(self, since, until, queue, step)

    def activity_totals(self) -> dict:
        """Return {queue: its activity summed since the history began} (queuectl.store.activity.totals)."""
        from queuectl.store import activity

        return activity.totals(self)

    def purge_history(self, before: float | None, hours_before: float | None = None,
                      limit: int = HISTORY_BATCH) -> int:
        """Fold about `limit` rows of history: those older than `before` (Unix seconds; None: none) into each
        queue's totals, then the minutes before `hours_before`'s hour (None: none) into their hours; return how
        many rows it deleted (queuectl.store.activity.purge)."""
        from queuectl.store import activity

        return activity.purge(self, before, hours_before, limit)

    # Finding jobs: its module loads when first used, never on `queuectl enqueue`'s path.
    def find_jobs(self, filter: JobFilter, before_seq: int | None = None, limit: int = 50) -> list[Job]:
        """Return up to `limit` jobs that `filter` matches, newest first, with seq below `before_seq` when given
        (keyset pages; queuectl.store.search.find)."""
        from queuectl.store import search

        return search.find(self, filter, before_seq, limit)

    def count_jobs(self, filter: JobFilter, cap: int = 10_000) -> int:
        """Return how many jobs `filter` matches, counting at most `cap` + 1 (queuectl.store.search.count)."""
        from queuectl.store import search

        return search.count(self, filter, cap)

    def dependencies(self, job_id: str) -> Dependencies:
        """Return the jobs `job_id` waits for and those waiting for it, bounded, with their states; raises
        NotFound (queuectl.store.search.dependencies)."""
        from queuectl.store import search

        return search.dependencies(self, job_id)

    def job_attempts(self, job_id: str, limit: int | None = None) -> list[Attempt]:
        """Return the newest `limit` (None: 100) attempts of job `job_id` that ended without completing, oldest
        first; raises NotFound (queuectl.store.search.attempts)."""
        from queuectl.store import search

        return search.attempts(self, job_id, limit)


__all__ = ["SqlStore", "SqlCore", "JOB_COLUMNS", "claimed_jobs"]
