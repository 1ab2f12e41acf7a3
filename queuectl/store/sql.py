"""The SQL both stores share: every query and rule of the queue, written once.

SqliteStore (sqlite.py) and PostgresStore (postgres.py) subclass SqlStore and supply
the connection and what differs between the two engines: transactions, error mapping,
index hints, row locks, claims and counters. Statements here use `?` placeholders
(the PostgreSQL adapter turns them into `%s`) and SQL that both engines accept.

Every state change is one statement or one write transaction, and every write that
finishes a job checks that the calling worker still owns it. The store knows nothing of
processes or signals; callers pass the time in (`now`: a queuectl.clock.Instant from
`store.now()`, or a bare wall-clock reading in Unix seconds, which schedules on the wall
clock alone).
"""

from __future__ import annotations

import dataclasses
import json
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from queuectl import settings as settings_mod
from queuectl.backoff import last_attempt
from queuectl.clock import Instant, instant
from queuectl.errors import Conflict, DatabaseError, InvalidConfig, InvalidInput, NotFound
from queuectl.jobspec import NewJob
from queuectl.models import Job, JobState, WorkerInfo
from queuectl.schema import KEY_HELD, dependency_failed
from queuectl.store.base import (PURGE_BATCH, CancelResult, DuplicateJob, Enqueued, Exchange, Exchanged, FollowedOutput,
                                 JobProcess, LiveOutput, Outcome, UnknownDependency, WorkerGone, after_failure,
                                 due_on_monotonic, schedule)
from queuectl.store.limits import LimitStore
from queuectl.store.schedules import ScheduleStore
from queuectl.store import fragments
from queuectl.store.timing import clock_values, due, placeholders

_JOB_COLUMNS = (
    "seq, id, queue, command, state, priority, attempts, max_retries, timeout, cwd, run_at, "
    "created_at, updated_at, started_at, finished_at, worker_id, pgid, exit_code, last_error, key"
)
# Due (queuectl.store.timing.due) with `?` placeholders; its parameters: _due_params.
_DUE, _DUE_SLOTS = placeholders(due())
# Ready (fragments.ready) with `?` placeholders: its parameters are _DUE's.
_READY_JOB = placeholders(fragments.ready())[0]


class SqlStore(ScheduleStore, LimitStore):
    """The queue's operations on a SQL database; subclasses supply the engine.

    A subclass sets `self.c` (a connection whose `execute(sql, params)` and
    `executemany` take `?` placeholders and return a cursor with rows addressable by
    index and by column name) and `self.defaults`, and implements `_errors`, `_write`,
    `_claim_rows` and the class attributes below.
    """

    #: The exception a unique or primary-key violation raises.
    UniqueViolation: type[Exception] = Exception
    #: Index hints after `FROM jobs` for ready-job and finished-job scans ("" where the planner needs none).
    READY_INDEX = ""
    FINISHED_INDEX = ""
    #: Row-lock clauses appended to a SELECT inside a write transaction ("" where a write
    #: transaction already excludes every other writer, as SQLite's BEGIN IMMEDIATE does).
    FOR_SHARE = ""
    FOR_UPDATE = ""
    #: FOR_UPDATE that passes over rows another transaction has locked.
    SKIP_LOCKED = ""
    #: Where the per-(queue, state) job counts and the per-(queue, outcome) run counts are read from.
    COUNTS_FROM = "job_counts"
    RUNS_FROM = "job_runs"
    #: Two byte strings joined, as a byte string ({0} then {1}).
    CONCAT = "({0} || {1})"

    c: Any
    defaults: dict[str, Any]

    # -- what each engine supplies ------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn the engine's errors into one-line queuectl errors (unique violations pass through)."""
        raise NotImplementedError
        yield

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """Run the block in one write transaction; roll back on any exception."""
        raise NotImplementedError
        yield

    def _claim_rows(self, c, worker_id: int, where: str, params: list, limit: int, now: Instant) -> list:
        """Move up to `limit` jobs matching `where` to processing for `worker_id`; return their rows."""
        raise NotImplementedError

    def _notify(self, c) -> None:
        """Inside a write transaction: wake the workers once it commits, for jobs may be ready or cancels
        requested (never after a rollback). PostgreSQL NOTIFYs; SQLite pokes this host's workers."""

    def describe(self) -> str:
        """The database as it may be shown to a user (never with a password)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the connection."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- time -----------------------------------------------------------------------------------

    def clock(self) -> float:
        """The wall clock this database's times are on, in Unix seconds (this host's on SQLite)."""
        return time.time()

    def now(self) -> Instant:
        """This process's clocks now: the store's wall clock, CLOCK_MONOTONIC and its domain."""
        from queuectl.procs import clock_domain

        return Instant(self.clock(), time.monotonic(), clock_domain())

    # -- wake-ups and maintenance -------------------------------------------------------------------

    def wakeup_source(self):
        """Where wake-ups from other hosts arrive: an object with `fileno()` (readable when one came) and
        `take()` (consume them); None where the engine has none (SQLite: queuectl.wake pokes the worker)."""
        return None

    def maintain(self, worker_id: int) -> None:
        """Housekeeping a worker does at each heartbeat (none by default)."""

    def compact(self) -> str | None:
        """Give all free space back to the filesystem now; return a line saying what was done, or None.

        Nothing to do by default: PostgreSQL's autovacuum makes freed space reusable by itself.
        """
        return None

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], now: Instant | float) -> list[Enqueued]:
        """Insert `jobs` in one transaction, all or none; return what became of each, in order.

        A job's relative wait (`delay`, 0 for one given no time) counts from `now` (its
        run_at is set again from it, on the store's clock) and is also kept on `now`'s
        monotonic clock; an absolute run_at (delay None) is kept as given. A job with a key
        that a job not yet ended holds (one enqueued before, or earlier in `jobs`) adds
        nothing: its Enqueued names the holder. The jobs_key_held unique index decides, so
        concurrent enqueues of one key add one job. A job with `after` is blocked until
        those jobs have completed (pending at once if they have; cancelled at once if one is
        dead or cancelled; see _dependencies). Raises DuplicateJob naming the first id that
        exists already or repeats in `jobs`, UnknownDependency for an `after` that names no
        job (nor one earlier in `jobs`).
        """
        now = instant(now)
        rows = [_row(j, now) for j in jobs]
        done: list[Enqueued] = []
        try:
            with self._write() as c:
                plain: list[tuple] = []  # jobs without a key or dependencies, inserted together (in order)
                holders: dict[str, str] = {}  # a job of `jobs` that added nothing -> the key's holder
                for index, (job, row) in enumerate(zip(jobs, rows)):
                    if job.key is None and not job.after:
                        plain.append((*row, *_READY_NOW))
                        done.append(Enqueued(job.id))
                        continue
                    if plain:
                        c.executemany(_INSERT, plain)
                        plain = []
                    deps, start = self._dependencies(c, job, index, holders, now) if job.after else ([], _READY_NOW)
                    result, seq = self._insert_one(c, job, (*row, *start))
                    if result.held is None and start[0] == "cancelled":
                        result = Enqueued(job.id, cancelled=start[3])
                    if result.held is not None:
                        holders[job.id] = result.id
                    elif deps:
                        c.executemany("INSERT INTO job_deps (seq, after_seq) VALUES (?, ?)", [(seq, d) for d in deps])
                    done.append(result)
                if plain:
                    c.executemany(_INSERT, plain)
                if any(e.held is None for e in done):
                    self._notify(c)
        except self.UniqueViolation as e:
            with self._errors():
                index = self._first_duplicate([j.id for j in jobs])
            if index is None:
                raise DatabaseError(f"database {self.describe()}: {e}") from None
            raise DuplicateJob(jobs[index].id, index) from None
        return done

    def _dependencies(self, c, job: NewJob, index: int, holders: dict[str, str], now: Instant) -> tuple[list, tuple]:
        """Mark the jobs of `job.after` as having dependants; return (their seqs, the new job's state,
        blockers, finished_at, last_error).

        The mark is an UPDATE, which locks their rows (on PostgreSQL, in seq order) and reads
        their latest states: a completion of one of them waits for this transaction, and its
        trigger then sees the new job (schema.RELEASE_DEPENDANTS), or it came first and this
        reads it completed. An id of `jobs` matched to a key's holder (`holders`) means that
        holder. Blocked while any is not completed; cancelled at once, with the last error a
        failure leaves, when one is dead or cancelled (in the order given): as if it had ended
        so after the enqueue. Raises UnknownDependency.
        """
        ids = list(dict.fromkeys(holders.get(i, i) for i in job.after))
        marks = ", ".join("?" * len(ids))
        found = {r["id"]: (r["seq"], JobState(r["state"])) for r in c.execute(
            f"UPDATE jobs SET dependants = 1 WHERE seq IN (SELECT seq FROM jobs WHERE id IN ({marks})"
            f" ORDER BY seq{self.FOR_UPDATE}) RETURNING seq, id, state", ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise UnknownDependency(job.id, missing[0], index)
        failed = next((i for i in ids if found[i][1] in (JobState.DEAD, JobState.CANCELLED)), None)
        seqs = [found[i][0] for i in ids]
        if failed is not None:
            return seqs, ("cancelled", 0, now.wall, dependency_failed(failed, found[failed][1].value))
        blockers = sum(found[i][1] != JobState.COMPLETED for i in ids)
        return seqs, ("blocked" if blockers else "pending", blockers, None, None)

    @staticmethod
    def _insert_one(c, job: NewJob, row: tuple) -> tuple[Enqueued, int | None]:
        """Insert one job; with a key, or name the job that holds it. Return (what became of it, its seq)."""
        if job.key is None:
            return Enqueued(job.id), c.execute(f"{_INSERT} RETURNING seq", row).fetchone()[0]
        for _ in range(3):  # PostgreSQL: the holder may end between the two statements
            added = c.execute(f"{_INSERT} ON CONFLICT (key) WHERE {KEY_HELD} DO NOTHING RETURNING seq", row).fetchone()
            if added:
                return Enqueued(job.id), added[0]
            holder = c.execute(f"SELECT id, state FROM jobs WHERE key = ? AND {KEY_HELD}", (job.key,)).fetchone()
            if holder is not None:
                return Enqueued(holder["id"], JobState(holder["state"])), None
        raise DatabaseError(f"key {job.key!r} is taken and freed again faster than it can be read; try again")

    @staticmethod
    def _insert_run(c, job: NewJob, now: Instant) -> bool:
        """Insert a schedule's run, ready when due; False, adding nothing, if its id exists or its key is held."""
        return c.execute(f"{_INSERT} ON CONFLICT DO NOTHING RETURNING seq", (*_row(job, now), *_READY_NOW)
                         ).fetchone() is not None

    def _first_duplicate(self, ids: list[str]) -> int | None:
        """Return the index of the first id that exists already or repeats an earlier one, or None."""
        seen: set[str] = set()
        for index, job_id in enumerate(ids):
            if job_id in seen or self.c.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone():
                return index
            seen.add(job_id)
        return None

    # -- worker side ------------------------------------------------------------------------

    def exchange(self, worker_id: int, ex: Exchange, queues: Sequence[str], now: Instant | float,
                 config: dict[str, Any] | None = None) -> Exchanged:
        """Record what `ex` says and claim up to `ex.claim` ready jobs, in one transaction (a worker's
        exchange with the store; see Exchange for what is recorded, in which order).

        Ready: pending or failed and due (see _DUE), in `queues` (empty: every queue), of a
        queue not paused. Claim order: priority (higher first), then run_at, then enqueue order.
        A claimed job is processing for `worker_id` but counts no attempt until its start is
        recorded (Running.started_at, or Outcome.started_at for a job that also ended). Claims
        are atomic (see each engine's _claim_rows): two workers never claim the same job.

        An ended job's success completes it; a failure schedules a retry (state failed, run_at =
        now + backoff) while attempts <= max_retries, else moves it to dead (the DLQ); a job
        whose cancel was requested is cancelled. A job this worker no longer owns is left alone.
        `config` (the settings in force, as the worker last read them) spares a read of the
        config table. Returns Exchanged (the ended jobs' new states, None for a job not owned; the
        claimed jobs; the limited queues the claim saw). Raises WorkerGone, changing nothing, if the
        worker is no longer registered.
        """
        now = instant(now)
        if not ex.writes() and (ex.claim <= 0 or not self._any_ready(queues, now)):
            return Exchanged([], [])  # an idle poll: a read, no write lock
        with self._write() as c:
            # The share lock makes a recovery of this worker wait for the commit, and then see the claims.
            if not c.execute(f"SELECT 1 FROM workers WHERE id = ?{self.FOR_SHARE}", (worker_id,)).fetchone():
                # Recovered while it waited for the lock: jobs claimed now would belong to nobody.
                raise WorkerGone(f"worker #{worker_id} is no longer registered")
            config = config or self._settings(c)
            if ex.running:
                c.executemany(
                    _RUNNING,
                    [(int(r.started_at is not None), r.started_at, r.pgid, r.pgid_start, r.job_id, worker_id)
                     for r in ex.running])
            if ex.output:
                self._record_output(c, worker_id, ex.output, config["output-limit"])
            states = self._finish(c, worker_id, ex.ended, now, config)
            self._requeue(c, worker_id, ex.requeue, now)
            self._release(c, worker_id, ex.release, now)
            if ex.claim <= 0:
                return Exchanged(states, [])
            return Exchanged(states, *self._claim(c, worker_id, queues, ex.claim, now, ex.free))

    def _claim(self, c, worker_id: int, queues: Sequence[str], limit: int, now: Instant,
               free: int | None = None) -> tuple[list[Job], frozenset[str]]:
        """Claim up to `limit` jobs; of limited queues (queuectl.store.limits) no more than `free` (None: `limit`).
        Return (the claimed jobs, the limited queues among `queues`)."""
        limits = self._limits_for_claim(c, queues)
        if limits:
            rows = self._claim_within_limits(c, worker_id, queues, limit, limit if free is None else free, limits, now)
            return claimed_jobs(rows), frozenset(r["name"] for r in limits)
        where, params = self._ready_filter(queues, now)
        return claimed_jobs(self._claim_rows(c, worker_id, where, params, limit, now)), frozenset()

    def _any_ready(self, queues: Sequence[str], now: Instant) -> bool:
        return self._exists_ready(*self._ready_filter(queues, now))

    def _exists_ready(self, where: str, params: list) -> bool:
        with self._errors():
            return self.c.execute(f"SELECT EXISTS (SELECT 1 FROM jobs {self.READY_INDEX} WHERE {where})",
                                  params).fetchone()[0] == 1

    @staticmethod
    def _ready_filter(queues: Sequence[str], now: Instant) -> tuple[str, list]:
        return _queue_filter(_READY_JOB, _due_params(now), queues)

    def has_work(self, queues: Sequence[str], now: Instant | float) -> bool:
        """Return True if a job in `queues` is ready now or is waiting for a retry (state failed).

        Jobs of paused queues do not count.
        """
        return self._exists_ready(*_queue_filter(f"{fragments.READY_STATES} AND ({_DUE} OR state = 'failed') AND {fragments.not_paused()}",
                                                 _due_params(instant(now)), queues))

    def _finish(self, c, worker_id: int, outcomes: Sequence[Outcome], now: Instant, config) -> list[JobState | None]:
        """Record the ended jobs: successes in one batch of statements, failures one by one."""
        states: dict[int, JobState | None] = {}
        done = [(i, o) for i, o in enumerate(outcomes) if o.ok]
        rows = self._update_returning(
            c, _COMPLETED,
            [(int(o.started_at is not None), o.started_at, *self._ended(o, now), o.job_id, worker_id) for _, o in done])
        for (i, o), row in zip(done, rows):
            states[i] = None if row is None else JobState.COMPLETED
            if row is not None:
                self._keep_output(c, row, o)
        if any(row is not None and row["dependants"] for row in rows):
            self._notify(c)  # its trigger may have released dependants: wake the workers to claim them
        for i, o in enumerate(outcomes):
            if not o.ok:
                states[i] = self._fail_one(c, worker_id, o, now, config)
        return [states[i] for i in range(len(outcomes))]

    def _update_returning(self, c, sql: str, rows: list[tuple]) -> list:
        """Run `sql` (an UPDATE ... RETURNING of at most one row) once per parameter tuple; return
        each run's row or None. Engines that can send them together override this."""
        return [c.execute(sql, params).fetchone() for params in rows]

    @staticmethod
    def _ended(o: Outcome, now: Instant) -> tuple:
        """The values of fragments.ENDED_SET for outcome `o` (wall, ended_at, exit_code, error)."""
        ended_at = now.wall if o.ended_at is None else min(o.ended_at, now.wall)
        return now.wall, ended_at, o.exit_code, o.error

    def _fail_one(self, c, worker_id: int, o: Outcome, now: Instant, config) -> JobState | None:
        row = c.execute(f"SELECT seq, attempts, max_retries, cancel_requested_at, started_at FROM jobs {_OWNED}",
                        (o.job_id, worker_id)).fetchone()
        if row is None:
            return None
        attempts = row["attempts"] + int(o.started_at is not None and row["started_at"] is None)
        state, schedule = after_failure(attempts, row["max_retries"], now, config, row["cancel_requested_at"])
        c.execute(_FAILED,
                  (state.value, attempts, o.started_at, *schedule, *self._ended(o, now), row["seq"]))
        self._keep_output(c, {"seq": row["seq"], "attempts": attempts}, o)
        return state

    @staticmethod
    def _keep_output(c, row, o: Outcome) -> None:
        """Store the run's output; or delete an earlier attempt's, which must not pass for this one's."""
        if o.stdout or o.stderr:
            written = o.written or (len(o.stdout), len(o.stderr))
            c.execute(f"{fragments.KEEP_OUTPUT} VALUES (?, ?, ?, ?, ?, ?){fragments.KEEP_OUTPUT_CONFLICT}",
                      (row["seq"], o.stdout, o.stderr, row["attempts"], *written))
        elif row["attempts"] > 1:
            c.execute("DELETE FROM job_output WHERE seq = ?", (row["seq"],))

    def _record_output(self, c, worker_id: int, output: Sequence[LiveOutput], limit: int) -> None:
        """Append what running jobs of this worker wrote to their stored output, keeping the last `limit`
        bytes of each stream. The bytes a record holds that the store has already (a record sent again
        after its reply was lost) are skipped; output of an earlier attempt is replaced."""
        def stream(name: str) -> str:
            new = f"substr(excluded.{name}, CAST(job_output.{name}_total - ? + 1 AS INTEGER))"
            # SQLite's substr of an empty blob is NULL: coalesce
            joined = self.CONCAT.format(f"job_output.{name}", f"coalesce({new}, excluded.{name})")
            return (f"{name} = CASE WHEN job_output.attempt = excluded.attempt AND job_output.{name}_total >= ?"
                    f" THEN coalesce(substr({joined}, CASE WHEN length({joined}) > {int(limit)}"
                    f" THEN length({joined}) - {int(limit)} + 1 ELSE 1 END), {joined}) ELSE excluded.{name} END")

        out, err = stream("stdout"), stream("stderr")  # every ? in each is that stream's `from`
        c.executemany(
            f"{fragments.KEEP_OUTPUT} SELECT seq, ?, ?, attempts, ?, ? FROM jobs {_OWNED} ON CONFLICT (seq) DO UPDATE SET"
            f" {out}, {err}, attempt = excluded.attempt,"
            " stdout_total = excluded.stdout_total, stderr_total = excluded.stderr_total",
            [(o.stdout, o.stderr, *o.written, o.job_id, worker_id, *[o.stdout_from] * out.count("?"),
              *[o.stderr_from] * err.count("?")) for o in output])

    def read_output(self, job_id: str, attempt: int | None,
                    positions: tuple[int, int]) -> tuple[Job, FollowedOutput | None]:
        """Read job `job_id` and, in the same statement, its stored output that follows `positions` (bytes of
        stdout and stderr already read) when that output is still of `attempt`; else all of it.

        For `logs --follow`: what a running job writes reaches the store within about
        worker.OUTPUT_EVERY seconds; once the job has ended its output is final. Raises NotFound.
        """
        cols = ", ".join(f"j.{c.strip()}" for c in _JOB_COLUMNS.split(","))

        def start(name: str, position: str) -> str:  # from which byte of the stored tail to read
            total = f"coalesce(o.{name}_total, length(o.{name}))"
            return (f"CASE WHEN o.attempt = ? AND {total} - {position} < length(o.{name})"
                    f" THEN CAST(length(o.{name}) - ({total} - {position}) + 1 AS INTEGER) ELSE 1 END")

        with self._errors():
            row = self.c.execute(
                f"SELECT {cols}, o.attempt AS out_attempt, coalesce(o.stdout_total, length(o.stdout)) AS out_total,"
                f" coalesce(o.stderr_total, length(o.stderr)) AS err_total, length(o.stdout) AS out_len,"
                f" length(o.stderr) AS err_len, substr(o.stdout, {start('stdout', '?')}) AS out_new,"
                f" substr(o.stderr, {start('stderr', '?')}) AS err_new"
                " FROM jobs j LEFT JOIN job_output o ON o.seq = j.seq WHERE j.id = ?",
                (attempt, positions[0], positions[0], attempt, positions[1], positions[1], job_id)).fetchone()
        if row is None:
            raise NotFound(f"no job with id {job_id!r}")
        job = Job.from_row(row)
        if row["out_len"] is None:
            return job, None
        out, err = bytes(row["out_new"] or b""), bytes(row["err_new"] or b"")  # SQLite: substr of b"" is NULL
        return job, FollowedOutput(out, err, row["out_total"] - len(out), row["err_total"] - len(err),
                                   (row["out_total"], row["err_total"]), attempt=row["out_attempt"])

    @staticmethod
    def _requeue(c, worker_id: int, job_ids: Sequence[str], now: Instant) -> None:
        """Put running jobs (stopped by a forced stop) back to pending, their attempt given back.

        They keep the due time they were claimed by, so they are ready again at once (unless
        an absolute run_at lies ahead of a wall clock stepped back since).
        """
        if job_ids:
            c.executemany(f"{_OUTPUT_BEFORE} (SELECT seq FROM jobs {_OWNED})",
                          [(job_id, worker_id) for job_id in job_ids])
            c.executemany(
                "UPDATE jobs SET state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
                " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                " worker_id = NULL, pgid = NULL, pgid_start = NULL,"
                " updated_at = ?, finished_at = CASE WHEN cancel_requested_at IS NULL"
                f" THEN finished_at ELSE ? END {_OWNED}",
                [(now.wall, now.wall, job_id, worker_id) for job_id in job_ids])

    @staticmethod
    def _release(c, worker_id: int, job_ids: Sequence[str], now: Instant) -> None:
        """Give back claimed jobs that never started: pending again (cancelled if a cancel was requested),
        no attempt counted, no run counted."""
        if job_ids:
            c.executemany(
                f"UPDATE jobs SET {_RELEASED}, updated_at = ? {_OWNED} AND started_at IS NULL",
                [(now.wall, now.wall, job_id, worker_id) for job_id in job_ids])

    # -- workers and recovery -----------------------------------------------------------------

    def register_worker(self, info: dict[str, Any], now: Instant | float, replace: int | None = None,
                        config: dict[str, Any] | None = None, replace_seen: tuple | None = None) -> tuple[int, list]:
        """Register a worker incarnation; return (its id, [(job id, state)] recovered from `replace`).

        `info` has name, host, boot_id, pid, pid_start, slots, queues (list), unit, and
        optionally pid_ns and uid. With `replace`, the dead worker row of that id (same name)
        is removed first and its processing jobs recovered as `recover` does, provided its
        row still shows `replace_seen` (WorkerInfo.seen) when given; a row already removed
        (another worker recovered it meanwhile) leaves nothing to recover.
        Raises Conflict if a worker of that name is registered and is not the one being
        replaced (or beat since it was judged).
        """
        now = instant(now)
        with self._write() as c:
            recovered = []
            if replace is not None:
                if replace_seen is None or self._unchanged(c, replace, replace_seen):
                    recovered = self._recover(c, replace, now, config)
                elif c.execute("SELECT 1 FROM workers WHERE id = ?", (replace,)).fetchone():
                    raise Conflict(f"a worker named {info['name']!r} came back to life; not replacing it")
                # else another worker recovered it meanwhile: nothing is left to take over
            try:
                cur = c.execute(
                    "INSERT INTO workers (name, host, boot_id, pid, pid_start, pid_ns, uid, slots, queues, unit,"
                    " started_at, heartbeat_at, heartbeat_mono) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " RETURNING id",
                    (info["name"], info["host"], info["boot_id"], info["pid"], info["pid_start"], info.get("pid_ns"),
                     info.get("uid"), info["slots"], ",".join(info["queues"]), info.get("unit"), now.wall, now.wall,
                     now.mono),
                )
            except self.UniqueViolation:
                raise Conflict(f"a worker named {info['name']!r} is already registered and alive") from None
            return cur.fetchone()[0], recovered

    def heartbeat(self, worker_id: int, now: Instant | float) -> bool:
        """Record that the worker is alive (and count the beat); return False if its registration is gone."""
        now = instant(now)
        with self._errors():
            cur = self.c.execute(
                "UPDATE workers SET heartbeat_at = ?, heartbeat_mono = ?, beats = beats + 1 WHERE id = ?",
                (now.wall, now.mono, worker_id))
        return cur.rowcount == 1

    def mark_draining(self, worker_id: int, now: Instant | float) -> None:
        """Record that the worker has begun to drain (claims nothing more)."""
        with self._errors():
            self.c.execute("UPDATE workers SET draining_since = ? WHERE id = ? AND draining_since IS NULL",
                           (instant(now).wall, worker_id))

    def deregister(self, worker_id: int) -> None:
        """Remove the worker's registration."""
        with self._write() as c:
            c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))

    def worker_pids(self, host: str) -> list[tuple[int, str]]:
        """Return (pid, boot identity) of the workers registered from `host`."""
        with self._errors():
            return [(r[0], r[1]) for r in self.c.execute("SELECT pid, boot_id FROM workers WHERE host = ?", (host,))]

    def worker_by_name(self, name: str) -> WorkerInfo | None:
        """Return the registered worker called `name`, or None."""
        with self._errors():
            row = self.c.execute("SELECT * FROM workers WHERE name = ?", (name,)).fetchone()
        return WorkerInfo.from_row(row) if row else None

    def workers(self) -> list[WorkerInfo]:
        """Return every registered worker with the ids of the jobs it is running, by name."""
        with self._errors():
            rows = self.c.execute("SELECT * FROM workers ORDER BY name").fetchall()
            running: dict[int, list[str]] = {}
            for r in self.c.execute(
                "SELECT worker_id, id FROM jobs WHERE state = 'processing' ORDER BY started_at, seq"
            ):
                running.setdefault(r["worker_id"], []).append(r["id"])
        return [WorkerInfo.from_row(r, running.get(r["id"], ())) for r in rows]

    def worker_jobs(self, worker_id: int) -> list[JobProcess]:
        """Return the processing jobs of worker `worker_id`."""
        return self._job_processes("j.worker_id = ?", (worker_id,))

    def orphaned_jobs(self) -> list[JobProcess]:
        """Return processing jobs whose worker's registration is gone (their host fields are None)."""
        return self._job_processes("w.id IS NULL", ())

    def _job_processes(self, where: str, params: tuple) -> list[JobProcess]:
        with self._errors():
            rows = self.c.execute(
                "SELECT j.id, j.worker_id, j.pgid, j.pgid_start, j.queue, j.attempts, w.host, w.boot_id, w.pid_ns,"
                f" w.uid, j.started_at FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id"
                f" WHERE j.state = 'processing' AND ({where})",
                params,
            ).fetchall()
        return [JobProcess(r["id"], r["worker_id"], r["pgid"], r["pgid_start"], r["host"], r["boot_id"],
                           r["pid_ns"], r["queue"], r["attempts"], r["uid"], r["started_at"] is not None) for r in rows]

    def recover(self, worker_id: int | None, seen: tuple | None, now: Instant | float,
                config: dict[str, Any] | None = None) -> list[tuple[str, JobState]]:
        """Recover the processing jobs of a dead worker; return [(job id, new state)].

        The caller judged the worker dead or stale when its row showed `seen`
        (WorkerInfo.seen: its heartbeat count and time); inside the transaction the row
        must still show them, so a worker that beat since keeps its jobs (and a worker
        already recovered by another is left alone).
        `worker_id` None recovers the jobs whose worker row is gone. Each job whose start was
        recorded counts a failed attempt, error "worker lost", and follows the retry/DLQ rule;
        so does a job claimed and never recorded as started (its worker may have started it an
        instant before it died), unless a cancel of it was requested (it is cancelled) or its
        next run was its last attempt, which a worker records before it starts it (so it never
        ran: back to pending, no attempt counted; queuectl.backoff.last_attempt). A job that kills
        its worker at once thus runs at most max_retries + 1 times. The dead worker's
        registration is removed. `config`, the settings in force as the caller
        read them, spares reading them again.
        """
        now = instant(now)
        with self._write() as c:
            if worker_id is not None and not self._unchanged(c, worker_id, seen):
                return []
            return self._recover(c, worker_id, now, config)

    def _unchanged(self, c, worker_id: int, seen: tuple) -> bool:
        """Return True if the worker's row still shows `seen` (beats, heartbeat_at); lock it for the recovery."""
        return c.execute(f"SELECT 1 FROM workers WHERE id = ? AND beats = ? AND heartbeat_at = ?{self.FOR_UPDATE}",
                         (worker_id, *seen)).fetchone() is not None

    def _recover(self, c, worker_id: int | None, now: Instant, config=None) -> list[tuple[str, JobState]]:
        config = config or self._settings(c)
        if worker_id is None:
            rows = c.execute(
                "SELECT seq, id, attempts, max_retries, cancel_requested_at, started_at FROM jobs"
                " WHERE state = 'processing'"
                f" AND (worker_id IS NULL OR worker_id NOT IN (SELECT id FROM workers)){self.FOR_UPDATE}"
            ).fetchall()
        else:
            # The registration goes first: on PostgreSQL that waits for a claim of this worker
            # in flight (it holds a share lock on the row), whose jobs the next read then sees.
            c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))
            rows = c.execute(
                "SELECT seq, id, attempts, max_retries, cancel_requested_at, started_at FROM jobs"
                f" WHERE state = 'processing' AND worker_id = ?{self.FOR_UPDATE}",
                (worker_id,),
            ).fetchall()
        recovered = []
        for r in rows:
            unstarted = r["started_at"] is None  # claimed, and no start recorded (it may have run)
            if unstarted and (r["cancel_requested_at"] is not None
                              or last_attempt(r["attempts"], r["max_retries"], config)):
                # Not run: a cancel was asked before its start, or it was to run its last attempt,
                # whose start the worker records first (queuectl.backoff.last_attempt).
                c.execute(f"UPDATE jobs SET {_RELEASED}, updated_at = ? WHERE seq = ?", (now.wall, now.wall, r["seq"]))
                recovered.append((r["id"], JobState.CANCELLED if r["cancel_requested_at"] else JobState.PENDING))
                continue
            attempts = r["attempts"] + unstarted  # lost before its start was recorded: it may have run
            state, schedule = after_failure(attempts, r["max_retries"], now, config, r["cancel_requested_at"])
            c.execute(
                f"UPDATE jobs SET state = ?, attempts = ?, started_at = coalesce(started_at, ?), {_RESCHEDULE},"
                " updated_at = ?, finished_at = ?, exit_code = NULL, last_error = ?, worker_id = NULL, pgid = NULL,"
                " pgid_start = NULL WHERE seq = ?",
                (state.value, attempts, now.wall, *schedule, now.wall, now.wall,
                 "cancelled; worker lost" if state == JobState.CANCELLED else "worker lost", r["seq"]),
            )
            recovered.append((r["id"], state))
        return recovered

    # -- reading ------------------------------------------------------------------------------

    def get_job(self, job_id: str, output: bool = False) -> Job:
        """Return the job `job_id` (with its captured output if `output`); raises NotFound."""
        cols = ", ".join(f"j.{c.strip()}" for c in _JOB_COLUMNS.split(","))
        sql = f"SELECT {cols}"
        if output:
            sql += ", o.stdout, o.stderr FROM jobs j LEFT JOIN job_output o ON o.seq = j.seq"
        else:
            sql += " FROM jobs j"
        with self._errors():
            row = self.c.execute(sql + " WHERE j.id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job with id {job_id!r}")
        return self._with_after([Job.from_row(row)])[0]

    def _with_after(self, jobs: list[Job]) -> list[Job]:
        """`jobs` with their dependencies' ids (Job.after) read in."""
        if not jobs:
            return jobs
        after: dict[int, list[str]] = {}
        with self._errors():
            for at in range(0, len(jobs), 500):
                chunk = [j.seq for j in jobs[at:at + 500]]
                for r in self.c.execute(
                        "SELECT d.seq, p.id FROM job_deps d JOIN jobs p ON p.seq = d.after_seq"
                        f" WHERE d.seq IN ({', '.join('?' * len(chunk))}) ORDER BY p.seq", chunk):
                    after.setdefault(r[0], []).append(r[1])
        return [dataclasses.replace(j, after=tuple(after[j.seq])) if j.seq in after else j for j in jobs]

    def jobs_by_id(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """Return the jobs of `job_ids` that exist, by id (without output); 500 ids per query."""
        found: dict[str, Job] = {}
        ids = list(dict.fromkeys(job_ids))
        with self._errors():
            for at in range(0, len(ids), 500):
                chunk = ids[at:at + 500]
                rows = self.c.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id IN ({', '.join('?' * len(chunk))})",
                                      chunk).fetchall()
                found.update((r["id"], Job.from_row(r)) for r in rows)
        return found

    def held_keys(self, limit: int = 100) -> tuple[list[tuple[str, str, JobState]], int]:
        """Return ([(key, job id, state)] of up to `limit` held keys by key, how many keys are held in all).

        Held: by a job not yet ended (schema.KEY_HELD, the jobs_key_held index's WHERE)."""
        with self._errors():
            rows = self.c.execute(f"SELECT key, id, state FROM jobs WHERE {KEY_HELD} ORDER BY key LIMIT ?",
                                  (limit,)).fetchall()
            total = self.c.execute(f"SELECT count(*) FROM jobs WHERE {KEY_HELD}").fetchone()[0]
        return [(r[0], r[1], JobState(r[2])) for r in rows], total

    def list_jobs(self, state: JobState | None = None, queue: str | None = None, limit: int = 100) -> list[Job]:
        """Return up to `limit` jobs, newest first, optionally of one state and/or queue."""
        where, params = [], []
        if state is not None:
            where.append("state = ?")
            params.append(state.value)
        if queue is not None:
            where.append("queue = ?")
            params.append(queue)
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._errors():
            rows = self.c.execute(sql + " ORDER BY seq DESC LIMIT ?", (*params, limit)).fetchall()
        return self._with_after([Job.from_row(r) for r in rows])

    def oldest_ready(self, now: Instant | float) -> dict[str, float]:
        """Return {queue: seconds the oldest ready job has waited since its run_at} (queue latency).

        Ready as a claim sees it, paused queues included (they are waiting too).
        """
        now = instant(now)
        with self._errors():
            rows = self.c.execute(
                f"SELECT queue, min(run_at) FROM jobs {self.READY_INDEX} WHERE {fragments.READY_STATES} AND {_DUE}"
                " GROUP BY queue ORDER BY queue", _due_params(now)).fetchall()
        return {q: max(0.0, now.wall - run_at) for q, run_at in rows}

    def run_counts(self) -> dict[str, dict[str, int]]:
        """Return {queue: {outcome: runs}}: how runs ended, kept apart from the jobs (retention does not lower it)."""
        with self._errors():
            rows = self.c.execute(f"SELECT queue, outcome, n FROM {self.RUNS_FROM} ORDER BY queue, outcome").fetchall()
        out: dict[str, dict[str, int]] = {}
        for q, outcome, n in rows:
            out.setdefault(q, {})[outcome] = n
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Return {queue: {state: count}} for every queue that has jobs (zero counts left out)."""
        with self._errors():
            rows = self.c.execute(f"SELECT queue, state, n FROM {self.COUNTS_FROM} WHERE n > 0 ORDER BY queue"
                                  ).fetchall()
        out: dict[str, dict[str, int]] = {}
        for r in rows:
            out.setdefault(r["queue"], {})[r["state"]] = r["n"]
        return out

    # -- dead letter queue -----------------------------------------------------------------------

    def retry(self, job_ids: Sequence[str], now: Instant | float,
              states: Sequence[JobState] = (JobState.DEAD, JobState.CANCELLED)) -> list[JobState]:
        """Move dead or cancelled jobs (those of `states`) back to pending, attempts reset to 0, due at once;
        return each one's new state, in order.

        A job with dependencies goes back to blocked while one of them has not completed. All
        or none: raises NotFound for an unknown id, Conflict for a job in another state, for
        one whose key another job holds, or for one with a dependency that is dead or
        cancelled when all of `job_ids` are back (retry that one with it); then nothing changes.
        """
        now = instant(now)
        allowed = [s.value for s in states]
        marks = ", ".join("?" * len(allowed))
        with self._write() as c:
            seqs = []
            for job_id in job_ids:
                self._check_key_free(c, job_id)
                row = c.execute(
                    f"UPDATE jobs SET state = 'pending', attempts = 0, {_RESCHEDULE}, updated_at = ?,"
                    f" cancel_requested_at = NULL WHERE id = ? AND state IN ({marks}) RETURNING seq",
                    (*schedule(now, 0.0), now.wall, job_id, *allowed),
                ).fetchone()
                if row is None:
                    row = c.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
                    if row is None:
                        raise NotFound(f"no job with id {job_id!r}")
                    raise Conflict(f"job {job_id!r} is {row['state']}, not {' or '.join(allowed)};"
                                   f" only {' or '.join(allowed)} jobs can be retried")
                seqs.append(row[0])
            c.executemany(f"{_OUTPUT_BEFORE} ?", [(seq,) for seq in seqs])
            blocked = self._block_again(c, seqs, now)
            self._notify(c)
        return [JobState.BLOCKED if seq in blocked else JobState.PENDING for seq in seqs]

    def _block_again(self, c, seqs: list[int], now: Instant) -> set[int]:
        """Put the jobs of `seqs` that have dependencies not yet completed back to blocked, and return
        their seqs; raise Conflict for one with a dependency dead or cancelled.

        The dependencies' rows are locked first (on PostgreSQL): a completion of one in flight is
        then committed before they are counted, or waits and sees the job blocked."""
        blocked: set[int] = set()
        with_deps = [r[0] for r in c.execute(
            f"SELECT DISTINCT seq FROM job_deps WHERE seq IN ({', '.join('?' * len(seqs))})", seqs)] if seqs else []
        for seq in with_deps:
            deps = c.execute(f"SELECT id, state FROM jobs WHERE seq IN (SELECT after_seq FROM job_deps WHERE seq = ?)"
                             f" ORDER BY seq{self.FOR_SHARE}", (seq,)).fetchall()
            bad = next((d for d in deps if d["state"] in ("dead", "cancelled")), None)
            if bad is not None:
                job_id = c.execute("SELECT id FROM jobs WHERE seq = ?", (seq,)).fetchone()[0]
                raise Conflict(f"job {job_id!r} cannot be retried while its dependency {bad['id']!r} is"
                               f" {bad['state']}; retry both: queuectl retry {bad['id']} {job_id}")
            blockers = sum(d["state"] != "completed" for d in deps)
            if blockers:
                c.execute("UPDATE jobs SET state = 'blocked', blockers = ?, updated_at = ? WHERE seq = ?",
                          (blockers, now.wall, seq))
                blocked.add(seq)
        return blocked

    @staticmethod
    def _check_key_free(c, job_id: str) -> None:
        """Raise Conflict if job `job_id` has a key that another job, not yet ended, holds now."""
        holder = c.execute(f"SELECT id, state, key FROM jobs WHERE key = (SELECT key FROM jobs WHERE id = ?)"
                           f" AND id <> ? AND {KEY_HELD}", (job_id, job_id)).fetchone()
        if holder is not None:
            raise Conflict(f"job {job_id!r} cannot be retried: its key {holder['key']!r} is held by job"
                           f" {holder['id']!r} ({holder['state']}) until that one ends")

    def dlq_retry(self, job_ids: Sequence[str], now: Instant | float) -> list[JobState]:
        """Move dead jobs back to pending (retry, for the dead letter queue alone)."""
        return self.retry(job_ids, now, (JobState.DEAD,))

    # -- cancel and pause -------------------------------------------------------------------------

    def cancel(self, job_ids: Sequence[str], now: Instant | float) -> list[CancelResult]:
        """Cancel jobs by id, in one transaction; return what happened to each, in order.

        Pending and failed jobs are cancelled at once. For a processing job the request is
        recorded: its worker stops it and records it cancelled (or completed, if it exited 0
        first); a recovery finishes the cancel if the worker dies. Completed, dead and
        cancelled jobs, and unknown ids, are left alone and reported with an error; the
        others are cancelled all the same.
        """
        now = instant(now)
        with self._write() as c:
            return self._cancel_all(c, job_ids, now)

    def cancel_matching(self, queue: str | None, states: Sequence[JobState], now: Instant | float) -> list[CancelResult]:
        """Cancel every job in `states` (pending, failed, processing) of `queue` (None: every queue)."""
        now = instant(now)
        where, params = _queue_filter(f"state IN ({', '.join('?' * len(states))})", [s.value for s in states],
                                      [queue] if queue else [])
        with self._write() as c:
            ids = [r[0] for r in c.execute(f"SELECT id FROM jobs WHERE {where} ORDER BY seq", params)]
            return self._cancel_all(c, ids, now)

    def _cancel_all(self, c, job_ids: Sequence[str], now: Instant) -> list[CancelResult]:
        """Cancel each job, newest first (a dependant before its dependencies, which would cancel it
        on their own); return the results in the order of `job_ids`."""
        seqs: dict[str, int] = {}
        for at in range(0, len(job_ids), 500):
            chunk = list(job_ids[at:at + 500])
            seqs.update((r[0], r[1]) for r in c.execute(
                f"SELECT id, seq FROM jobs WHERE id IN ({', '.join('?' * len(chunk))})", chunk))
        done = {job_id: self._cancel_one(c, job_id, now)
                for job_id in sorted(dict.fromkeys(job_ids), key=lambda i: -seqs.get(i, 0))}
        results = [done[job_id] for job_id in job_ids]
        if any(r.result == "requested" for r in results):
            self._notify(c)  # the owning workers look for cancel requests when woken
        return results

    @staticmethod
    def _cancel_one(c, job_id: str, now: Instant) -> CancelResult:
        row = c.execute("SELECT j.seq, j.state, j.cancel_requested_at, w.name FROM jobs j"
                        " LEFT JOIN workers w ON w.id = j.worker_id WHERE j.id = ?", (job_id,)).fetchone()
        if row is None:
            return CancelResult(job_id, None, "error", f"no job with id {job_id!r}")
        state = JobState(row["state"])
        if state in (JobState.PENDING, JobState.BLOCKED, JobState.FAILED):
            c.execute("UPDATE jobs SET state = 'cancelled', updated_at = ?, finished_at = ?, last_error = 'cancelled',"
                      " delay = NULL, due_boot = NULL, due_mono = NULL WHERE seq = ?", (now.wall, now.wall, row["seq"]))
            return CancelResult(job_id, state, "cancelled")
        if state == JobState.PROCESSING:
            if row["cancel_requested_at"] is None:
                c.execute("UPDATE jobs SET cancel_requested_at = ? WHERE seq = ?", (now.wall, row["seq"]))
            return CancelResult(job_id, state, "requested", worker=row["name"])
        return CancelResult(job_id, state, "error", f"job {job_id!r} is {state.value}; only pending, blocked,"
                                                    " failed and processing jobs can be cancelled")

    def cancel_requests(self, worker_id: int) -> list[str]:
        """Return the ids of this worker's processing jobs whose cancel was requested."""
        with self._errors():
            return [r[0] for r in self.c.execute(
                "SELECT id FROM jobs WHERE worker_id = ? AND state = 'processing' AND cancel_requested_at IS NOT NULL",
                (worker_id,))]

    def set_paused(self, queues: Sequence[str], paused: bool, now: Instant | float) -> list[bool]:
        """Pause or resume queues; return for each whether it changed (False: it already was)."""
        now = instant(now)
        with self._write() as c:
            out = []
            for q in queues:
                was = c.execute("SELECT paused_at FROM queues WHERE name = ?", (q,)).fetchone()
                was_paused = was is not None and was[0] is not None
                if paused and not was_paused:
                    c.execute("INSERT INTO queues (name, paused_at) VALUES (?, ?)"
                              " ON CONFLICT (name) DO UPDATE SET paused_at = excluded.paused_at", (q, now.wall))
                elif not paused and was_paused:  # the row stays while it holds a limit
                    c.execute("UPDATE queues SET paused_at = NULL WHERE name = ?", (q,))
                    c.execute("DELETE FROM queues WHERE name = ? AND concurrency IS NULL AND rate_count IS NULL", (q,))
                out.append(paused != was_paused)
            if not paused and any(out):
                self._notify(c)
            return out

    def paused_queues(self) -> dict[str, float]:
        """Return {queue: paused since (Unix seconds)} of the paused queues."""
        with self._errors():
            return {r[0]: r[1] for r in self.c.execute(
                "SELECT name, paused_at FROM queues WHERE paused_at IS NOT NULL ORDER BY name")}

    # -- retention ------------------------------------------------------------------------------------

    def purge(self, older_than: dict[str, float], now: Instant | float, queue: str | None = None,
              limit: int = PURGE_BATCH) -> int:
        """Delete up to `limit` finished jobs, oldest first, in one transaction; return how many.

        `older_than` maps completed, cancelled or dead to an age in seconds: jobs of that
        state that finished longer ago are deleted, with their output; their run counts
        stay. Pending, processing and failed jobs are never deleted. Ages are on the wall
        clock. Raises InvalidInput for another state.
        """
        now, deleted = instant(now), 0
        with self._write() as c:
            for state, age in older_than.items():
                if state not in ("completed", "cancelled", "dead"):
                    raise InvalidInput(f"only completed, cancelled and dead jobs can be purged, not {state}")
                where, params = _finished_filter(state, now.wall - age, queue)
                deleted += c.execute(
                    f"DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs {self.FINISHED_INDEX} WHERE {where}"
                    " ORDER BY finished_at LIMIT ?)", (*params, limit - deleted)).rowcount
                if deleted >= limit:
                    break
        return deleted

    def count_purgeable(self, older_than: dict[str, float], now: Instant | float, queue: str | None = None) -> int:
        """Return how many jobs `purge` would delete in all, given no limit (for --dry-run)."""
        now, n = instant(now), 0
        with self._errors():
            for state, age in older_than.items():
                where, params = _finished_filter(state, now.wall - age, queue)
                n += self.c.execute(f"SELECT count(*) FROM jobs {self.FINISHED_INDEX} WHERE {where}",
                                    params).fetchone()[0]
        return n

    def take_lease(self, name: str, holder: int, now: Instant | float, ttl: float) -> bool:
        """Take or renew the lease `name` for `holder` (a worker id) for `ttl` seconds; False if another holds it.

        For work that one worker at a time does (retention). Times are on the wall clock:
        a step can at worst let two workers do it at once, which costs only contention.
        """
        now = instant(now)
        with self._write() as c:
            return c.execute(
                "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE"
                " SET holder = excluded.holder, expires_at = excluded.expires_at"
                " WHERE leases.holder = excluded.holder OR leases.expires_at < ?"
                " OR leases.holder NOT IN (SELECT id FROM workers)",
                (name, holder, now.wall + ttl, now.wall)).rowcount == 1

    # -- settings ---------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """Return every setting's value in force (stored or default), by canonical key.

        Raises InvalidConfig if a stored value is not valid (for example edited by hand).
        """
        with self._errors():
            return self._settings(self.c)

    def _settings(self, c, skip: str | None = None) -> dict[str, Any]:
        values = dict(self.defaults)
        for r in c.execute("SELECT key, value FROM config WHERE key <> coalesce(?, '')", (skip,)):
            if r["key"] not in settings_mod.SETTINGS:
                raise InvalidConfig(f"the database holds an unknown setting {r['key']!r} (written by hand or"
                                    " by a newer queuectl)")
            try:
                values[r["key"]] = settings_mod.parse_value(r["key"], json.loads(r["value"]))
            except (settings_mod.InvalidInput, ValueError) as e:
                reason = e if isinstance(e, settings_mod.InvalidInput) else f"{r['value']!r} is not a JSON value"
                raise InvalidConfig(f"the stored value of {r['key']} is invalid ({reason});"
                                    f" set it again with `queuectl config set {r['key']} VALUE`") from None
        return values

    def set_setting(self, key: str, raw: Any) -> Any:
        """Validate and store one setting; return its typed value.

        Raises InvalidInput for an unknown key, a bad value, or one that breaks the rule
        stale-after > 2 x heartbeat-interval.
        """
        name = settings_mod.canonical_key(key)
        value = settings_mod.parse_value(name, raw)
        with self._write() as c:
            merged = {**self._settings(c, skip=name), name: value}  # a bad stored value of `name` can be fixed
            settings_mod.check_consistent(merged)
            c.execute(
                "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (name, json.dumps(value)),
            )
        return value



def claimed_jobs(rows) -> list[Job]:
    """Jobs from claimed rows, in claim order (priority, then run_at, then enqueue order)."""
    return sorted((Job.from_row(r) for r in rows), key=lambda j: (-j.priority, j.run_at, j.seq))


def _finished_filter(state: str, before: float, queue: str | None) -> tuple[str, list]:
    """WHERE for jobs of `state` that finished before `before` (Unix s), of `queue` if given.

    It repeats the jobs_finished partial index's WHERE, so that SQLite can use the index
    (its planner needs the index's terms in the query, https://www.sqlite.org/partialindex.html).
    """
    return _queue_filter(f"{fragments.FINISHED_STATES} AND state = ? AND finished_at < ?", [state, before], [queue] if queue else [])


def _queue_filter(where: str, params: list, queues: Sequence[str]) -> tuple[str, list]:
    if queues:
        where += f" AND queue IN ({', '.join('?' * len(queues))})"
        params = [*params, *queues]
    return where, params


#: A new job (parameters: SqlStore.enqueue's rows, then state, blockers, finished_at, last_error).
_INSERT = ("INSERT INTO jobs (id, queue, command, priority, max_retries, timeout, cwd, run_at,"
           " delay, due_boot, due_mono, created_at, updated_at, key, state, blockers, finished_at, last_error)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
#: The last four values of _INSERT for a job that is ready when due.
_READY_NOW = ("pending", 0, None, None)
#: A job of the calling worker (parameters: job id, worker id).
_OWNED = "WHERE id = ? AND worker_id = ? AND state = 'processing'"
#: A claimed job given back unstarted (parameter: finished_at for a cancelled one).
_RELEASED = ("state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
             " finished_at = CASE WHEN cancel_requested_at IS NULL THEN finished_at ELSE ? END,"
             " last_error = CASE WHEN cancel_requested_at IS NULL THEN last_error ELSE 'cancelled' END,"
             " worker_id = NULL, pgid = NULL, pgid_start = NULL")
#: Marks a job's stored output as a run's that came before its current attempt count (a requeued run's,
#: whose attempt number the next run takes again; a retried job's), so that the next run's output
#: replaces it rather than being appended, and followers do not take it for that run's (parameter: seq).
_OUTPUT_BEFORE = "UPDATE job_output SET attempt = 0 WHERE seq ="
#: Sets a job's due time from _schedule's four values (a dead job's run_at is kept).
_RESCHEDULE = "run_at = coalesce(?, run_at), delay = ?, due_boot = ?, due_mono = ?"
#: A running job's start and process group recorded (parameters: fragments.running_set's, job id, worker id).
_RUNNING = placeholders(f"UPDATE jobs SET {fragments.running_set()} {_OWNED}")[0]
#: A job of the calling worker completed (parameters: fragments.completed_set's, job id, worker id).
_COMPLETED = placeholders(f"UPDATE jobs SET {fragments.completed_set()} {_OWNED} RETURNING seq, attempts, dependants")[0]
#: A job failed: retried, dead or cancelled (parameters: state, attempts, started_at, _RESCHEDULE's,
#: fragments.ENDED_SET's, seq).
_FAILED = placeholders(f"UPDATE jobs SET state = ?, attempts = ?, started_at = coalesce(?, started_at), {_RESCHEDULE},"
                       f" {fragments.ENDED_SET} WHERE seq = ?")[0]


def _row(j: NewJob, now: Instant) -> tuple:
    """The first values of _INSERT for new job `j` enqueued at `now` (see SqlStore.enqueue)."""
    return (j.id, j.queue, j.command, j.priority, j.max_retries, j.timeout, j.cwd,
            j.run_at if j.delay is None else now.wall + j.delay, j.delay,
            *due_on_monotonic(now, j.delay), now.wall, now.wall, j.key)


def _due_params(now: Instant) -> list:
    """The parameters of _DUE at `now`."""
    values = clock_values(now)
    return [values[slot] for slot in _DUE_SLOTS]


