"""The queue's operations on a SQL database, gathered for callers as one object: SqlStore.

Each concern is a module of functions that take an engine (queuectl.store.core.SqlCore) as their first
argument, its statements beside its rules (Python modules rather than .sql files: statements are composed
from the shared fragments and the engines' hints and locks):

- queuectl.store.jobs: enqueue (keys, dependencies) and the reads of jobs, their output and counts;
- queuectl.store.exchange: a worker's exchange (starts, output, ends, requeues, releases, the claim);
- queuectl.store.workers: registration, heartbeats, recovery of a dead worker's jobs, leases;
- queuectl.store.operator: retry, cancel, pause, purge;
- queuectl.store.activity: activity history (per queue and minute), its reads and its retention;
- queuectl.store.search: finding jobs by a filter (keyset pages, capped counts), a job's dependencies both ways;
- queuectl.store.schedules, queuectl.store.limits (with the one limited claim), queuectl.store.settings.

SqlStore is a facade and nothing more: each of its methods is a concern's function, named here once, so that
`store.enqueue(spec, now)` is `jobs.enqueue(store, spec, now)`. An engine subclasses it (SqliteStore in
queuectl.store.sqlite, PostgresStore in queuectl.store.postgres) and supplies SqlCore's abstract methods,
plus the three operations whose engines differ as a whole, each defined once per engine: `exchange`
(PostgreSQL's hot path is one statement), `heartbeat` (PostgreSQL reads the server's clock again after it)
and `purge` (SQLite gives freed pages back after it). The fragments of the queue's rules are
queuectl.store.fragments' and queuectl.store.timing's.
"""

from __future__ import annotations

# Aliased: the facade's methods take some of the modules' names (`workers`, `schedules`, `settings`, `activity`).
from queuectl.store import (activity as _activity, exchange as _exchange, jobs as _jobs, limits as _limits,
                            operator as _operator, schedules as _schedules, search as _search, settings as _settings,
                            workers as _workers)
from queuectl.store.core import JOB_COLUMNS, SqlCore, claimed_jobs


class SqlStore(SqlCore):
    """The queue's operations on a SQL database (see the module); subclasses are the engines."""

    # jobs
    enqueue = _jobs.enqueue
    get_job = _jobs.get_job
    jobs_by_id = _jobs.jobs_by_id
    held_keys = _jobs.held_keys
    list_jobs = _jobs.list_jobs
    oldest_ready = _jobs.oldest_ready
    run_counts = _jobs.run_counts
    counts = _jobs.counts
    read_output = _jobs.read_output
    # a worker's exchange (`exchange` itself is each engine's)
    has_work = _exchange.has_work
    # workers (`heartbeat` is each engine's)
    register_worker = _workers.register_worker
    mark_draining = _workers.mark_draining
    deregister = _workers.deregister
    stopped_workers = _workers.stopped_workers
    worker_pids = _workers.worker_pids
    worker_by_name = _workers.worker_by_name
    workers = _workers.workers
    worker_jobs = _workers.worker_jobs
    orphaned_jobs = _workers.orphaned_jobs
    recover = _workers.recover
    cancel_requests = _workers.cancel_requests
    take_lease = _workers.take_lease
    # operator actions (`purge` is each engine's)
    retry = _operator.retry
    dlq_retry = _operator.dlq_retry
    cancel = _operator.cancel
    set_paused = _operator.set_paused
    paused_queues = _operator.paused_queues
    count_purgeable = _operator.count_purgeable
    # schedules
    add_schedule = _schedules.add_schedule
    schedules = _schedules.schedules
    remove_schedules = _schedules.remove_schedules
    set_schedules_paused = _schedules.set_schedules_paused
    next_slot_at = _schedules.next_slot_at
    fire_schedules = _schedules.fire_schedules
    # limits
    set_limit = _limits.set_limit
    queue_limits = _limits.queue_limits
    rate_room_at = _limits.rate_room_at
    # settings
    settings = _settings.settings
    set_setting = _settings.set_setting
    # activity history
    activity = _activity.read
    activity_totals = _activity.totals
    purge_history = _activity.purge
    # finding jobs
    find_jobs = _search.find
    count_jobs = _search.count
    dependencies = _search.dependencies
    job_attempts = _search.attempts


__all__ = ["SqlStore", "SqlCore", "JOB_COLUMNS", "claimed_jobs"]
