"""The SQLite store: the only module that knows SQLite.

Every state change is one statement or one BEGIN IMMEDIATE transaction, and every write
that finishes a job checks that the calling worker still owns it. The store knows
nothing of processes or signals; callers pass the time in (`now`: a queuectl.clock.Instant,
or a bare wall-clock reading in Unix seconds, which schedules on the wall clock alone).
"""

from __future__ import annotations

import grp
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from queuectl import settings as settings_mod
from queuectl.clock import STEP_TOLERANCE, Instant, instant
from queuectl.errors import Conflict, DatabaseError, InvalidConfig, InvalidInput, NotFound, PermissionDenied
from queuectl.jobspec import NewJob
from queuectl.models import Job, JobState, WorkerInfo
from queuectl.store.base import (PURGE_BATCH, CancelResult, DuplicateJob, JobProcess, Outcome, WorkerGone,
                                 after_failure, due_on_monotonic, schedule)
from queuectl.schema import APPLICATION_ID, MIGRATIONS, REBUILDS, SCHEMA_VERSION

#: Seconds a connection waits for another writer's lock before reporting "database is locked".
BUSY_TIMEOUT = 30.0
#: Bytes the WAL file is truncated to after a checkpoint (PRAGMA journal_size_limit).
WAL_SIZE_LIMIT = 64 * 1024 * 1024

_JOB_COLUMNS = (
    "seq, id, queue, command, state, priority, attempts, max_retries, timeout, cwd, run_at, "
    "created_at, updated_at, started_at, finished_at, worker_id, pgid, exit_code, last_error"
)
# Must match the jobs_ready partial index's WHERE. Claims name that index (INDEXED BY): without
# ANALYZE statistics the planner prefers jobs_state and sorts every ready job on each claim.
_READY = "state IN ('pending', 'failed')"
# Must match the jobs_finished partial index's WHERE.
_FINISHED = "state IN ('completed', 'dead', 'cancelled')"
# Claims take nothing from a paused queue (`queuectl pause`).
_NOT_PAUSED = "queue NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL)"
# Due: on the monotonic clock of the boot that scheduled the job when the reader shares it;
# otherwise on the wall clock. A retry, or a job due at once when it was scheduled (delay 0),
# is also due if the reader's wall clock reads earlier than when it was scheduled (stepped
# back, or behind the scheduler's): a retry then runs no later than its backoff after the
# failure, and a job enqueued for now runs now. A longer delay given at enqueue is kept on
# the wall clock by such a reader. Parameters: domain, mono, wall, wall.
_DUE = (f"(CASE WHEN due_boot = ? THEN due_mono <= ? ELSE run_at <= ? OR ((delay = 0 OR state = 'failed')"
        f" AND run_at - delay > ? + {STEP_TOLERANCE}) END)")


class SqliteStore:
    """A queuectl database in one SQLite file.

    `defaults` replaces built-in setting defaults (from the site configuration file).
    `durable=True` commits with synchronous=FULL, so a returned enqueue survives power
    loss; workers use durable=False (synchronous=NORMAL in WAL mode): a power loss may then
    forget a claim or a completion, and the job runs again (at least once, never lost).
    Raises InvalidInput when the path cannot hold a database or holds another program's
    file, DatabaseError when the database cannot be used.
    """

    def __init__(self, path: str, *, durable: bool = True, busy_timeout: float = BUSY_TIMEOUT,
                 defaults: dict[str, Any] | None = None):
        self.path = os.path.abspath(path)
        self.busy_timeout = busy_timeout
        self.defaults = {**settings_mod.defaults(), **(defaults or {})}
        _check_path(self.path)
        _create_file(self.path)
        try:
            self.conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None)
        except sqlite3.Error as e:
            raise InvalidInput(f"cannot open database {self.path}: {e}") from None
        self.conn.row_factory = sqlite3.Row
        with self._errors():
            self.conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            self.conn.execute("PRAGMA foreign_keys = ON")
            # After a checkpoint the WAL file is cut back to this size, so it stays bounded.
            self.conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            self._migrate()

    # -- connection -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> "SqliteStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn sqlite3 errors into one-line queuectl errors."""
        try:
            yield
        except sqlite3.IntegrityError:
            raise  # callers turn constraint failures into domain errors
        except UnicodeEncodeError as e:  # a parameter with lone surrogates (e.g. non-UTF-8 argv bytes)
            raise InvalidInput(f"not valid UTF-8 text: {e.object!r}") from None
        except sqlite3.DatabaseError as e:
            text = str(e)
            if "file is not a database" in text:
                raise InvalidInput(f"{self.path} is not a queuectl database ({text})") from None
            if "disk is full" in text:
                raise DatabaseError(f"database {self.path}: {text} (free space on its filesystem)") from None
            if "readonly" in text or "unable to open" in text:
                raise InvalidInput(f"cannot write to database {self.path}: {text} (check its permissions)") from None
            raise DatabaseError(f"database {self.path}: {text}") from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one BEGIN IMMEDIATE transaction; roll back on any exception."""
        with self._errors():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # SQLite may have rolled back by itself already
                    self.conn.execute("ROLLBACK")
                raise

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        if version == SCHEMA_VERSION and app_id == APPLICATION_ID:
            return  # the common path: two reads, no lock
        has_tables = self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if app_id != APPLICATION_ID and (version != 0 or has_tables):
            raise InvalidInput(f"{self.path} is not a queuectl database (it is another program's SQLite file)")
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path} has schema version {version}, newer than this queuectl's {SCHEMA_VERSION}; upgrade queuectl"
            )
        if version == 0 and not has_tables:
            # Freed pages can then go back to the filesystem (incremental_vacuum after deletes);
            # it must be set before the first table exists.
            self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self._enter_wal()
        rebuild = any(step in REBUILDS for step in range(version + 1, SCHEMA_VERSION + 1))
        if rebuild:  # a no-op inside a transaction; dropping the old table must not cascade
            self.conn.execute("PRAGMA foreign_keys = OFF")
        try:
            with self._write() as c:
                version = c.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _statements(MIGRATIONS[step]):
                        c.execute(statement)
                    c.execute(f"PRAGMA user_version = {step}")
                if rebuild and c.execute("PRAGMA foreign_key_check").fetchone() is not None:
                    raise DatabaseError(f"{self.path}: migration left dangling job output; rolled back")
                c.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        finally:
            if rebuild:
                self.conn.execute("PRAGMA foreign_keys = ON")

    def _enter_wal(self) -> None:
        """Switch the file to WAL mode (persistent), waiting up to busy_timeout for other openers.

        The switch needs an exclusive lock and SQLite does not run the busy handler for it:
        two processes that open a new database at once (two units started together) would
        otherwise see "database is locked" at once. Must run outside a transaction.
        """
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    # -- enqueue --------------------------------------------------------------------------

    def enqueue(self, jobs: Sequence[NewJob], now: Instant | float) -> list[str]:
        """Insert `jobs` in one transaction, all or none; return their ids.

        A job's relative wait (`delay`, 0 for one given no time) is also kept on `now`'s
        monotonic clock. Raises DuplicateJob naming the first id that exists already or
        repeats in `jobs`.
        """
        now = instant(now)
        rows = [
            (j.id, j.queue, j.command, j.priority, j.max_retries, j.timeout, j.cwd, j.run_at, j.delay,
             *due_on_monotonic(now, j.delay), now.wall, now.wall)
            for j in jobs
        ]
        try:
            with self._write() as c:
                c.executemany(
                    "INSERT INTO jobs (id, queue, command, state, priority, max_retries, timeout, cwd, run_at,"
                    " delay, due_boot, due_mono, created_at, updated_at)"
                    " VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
        except sqlite3.IntegrityError as e:
            with self._errors():
                index = self._first_duplicate([j.id for j in jobs])
            if index is None:
                raise DatabaseError(f"database {self.path}: {e}") from None
            raise DuplicateJob(jobs[index].id, index) from None
        return [j.id for j in jobs]

    def _first_duplicate(self, ids: list[str]) -> int | None:
        """Return the index of the first id that exists already or repeats an earlier one, or None."""
        seen: set[str] = set()
        for index, job_id in enumerate(ids):
            if job_id in seen or self.conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone():
                return index
            seen.add(job_id)
        return None

    # -- worker side ------------------------------------------------------------------------

    def claim(self, worker_id: int, queues: Sequence[str], limit: int, now: Instant | float) -> list[Job]:
        """Atomically move up to `limit` ready jobs to processing for `worker_id`; return them.

        Ready: pending or failed and due (see _DUE), in `queues` (empty: every queue).
        Order: priority (higher first), then run_at, then enqueue order. Each claim counts
        one attempt. One UPDATE ... RETURNING inside BEGIN IMMEDIATE, so two workers never
        claim the same job. (`exchange` with nothing to finish.)
        """
        return self.exchange(worker_id, (), (), queues, limit, now)[1]

    def exchange(self, worker_id: int, outcomes: Sequence[Outcome], requeue: Sequence[str],
                 queues: Sequence[str], limit: int, now: Instant | float,
                 config: dict[str, Any] | None = None) -> tuple[list[JobState | None], list[Job]]:
        """Finish jobs, requeue jobs and claim new ones in one transaction (a worker's group commit).

        Does what `finish`, `requeue` and `claim` do, in that order, with one commit instead
        of three. `config` (the settings in force, as the worker last read them) spares a
        read of the config table. Returns (the finished jobs' new states, the claimed jobs).
        Raises WorkerGone, changing nothing, if it would claim for a worker no longer registered.
        """
        now = instant(now)
        if not outcomes and not requeue and not self._any_ready(queues, now):
            return [], []  # an idle poll: a read, no write lock
        with self._write() as c:
            if limit > 0 and not c.execute("SELECT 1 FROM workers WHERE id = ?", (worker_id,)).fetchone():
                # Recovered while it waited for the lock: jobs claimed now would belong to nobody.
                raise WorkerGone(f"worker #{worker_id} is no longer registered")
            config = config or self._settings(c)
            states = [self._finish_one(c, worker_id, o, now, config) for o in outcomes]
            self._requeue(c, worker_id, requeue, now)
            jobs = self._claim(c, worker_id, queues, limit, now) if limit > 0 else []
        return states, jobs

    def _claim(self, c, worker_id: int, queues: Sequence[str], limit: int, now: Instant) -> list[Job]:
        where, params = self._ready_filter(queues, now)
        rows = c.execute(
            f"UPDATE jobs SET state = 'processing', worker_id = ?, attempts = attempts + 1,"
            f" started_at = ?, updated_at = ?, finished_at = NULL, exit_code = NULL, pgid = NULL"
            f" WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_ready WHERE {where}"
            f" ORDER BY priority DESC, run_at, seq LIMIT ?) RETURNING {_JOB_COLUMNS}",
            (worker_id, now.wall, now.wall, *params, limit),
        ).fetchall()
        jobs = [Job.from_row(r) for r in rows]
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.seq))
        return jobs

    def _any_ready(self, queues: Sequence[str], now: Instant) -> bool:
        return self._exists_ready(*self._ready_filter(queues, now))

    def _exists_ready(self, where: str, params: list) -> bool:
        with self._errors():
            return self.conn.execute(f"SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_ready WHERE {where})",
                                     params).fetchone()[0] == 1

    @staticmethod
    def _ready_filter(queues: Sequence[str], now: Instant) -> tuple[str, list]:
        return _queue_filter(f"{_READY} AND {_DUE} AND {_NOT_PAUSED}", _due_params(now), queues)

    def has_work(self, queues: Sequence[str], now: Instant | float) -> bool:
        """Return True if a job in `queues` is ready now or is waiting for a retry (state failed).

        Jobs of paused queues do not count.
        """
        return self._exists_ready(*_queue_filter(f"{_READY} AND ({_DUE} OR state = 'failed') AND {_NOT_PAUSED}",
                                                 _due_params(instant(now)), queues))

    def record_processes(self, worker_id: int, started: Iterable[tuple[str, int, int | None]]) -> None:
        """Record each (job id, pgid, leader start time) of jobs this worker started, in one transaction."""
        with self._write() as c:
            c.executemany(
                "UPDATE jobs SET pgid = ?, pgid_start = ? WHERE id = ? AND worker_id = ? AND state = 'processing'",
                [(pgid, start, job_id, worker_id) for job_id, pgid, start in started],
            )

    def finish(self, worker_id: int, outcomes: Sequence[Outcome], now: Instant | float) -> list[JobState | None]:
        """Record how jobs ended, in one transaction; return each job's new state.

        A success completes the job. A failure schedules a retry (state failed, run_at =
        now + backoff) while attempts <= max_retries, else moves the job to dead (the DLQ).
        A job this worker no longer owns is left alone and its entry is None.
        (`exchange` with nothing to claim.)
        """
        return self.exchange(worker_id, outcomes, (), (), 0, now)[0]

    def _finish_one(self, c, worker_id, o: Outcome, now: Instant, config) -> JobState | None:
        owned = "WHERE id = ? AND worker_id = ? AND state = 'processing'"
        ended = ("updated_at = ?, finished_at = ?, exit_code = ?, last_error = ?,"
                 " worker_id = NULL, pgid = NULL, pgid_start = NULL")
        if o.ok:  # one statement: a success needs nothing read first
            state = JobState.COMPLETED
            row = c.execute(f"UPDATE jobs SET state = 'completed', {ended} {owned} RETURNING seq, attempts",
                            (now.wall, now.wall, o.exit_code, o.error, o.job_id, worker_id)).fetchone()
        else:
            row = c.execute(f"SELECT seq, attempts, max_retries, cancel_requested_at FROM jobs {owned}",
                            (o.job_id, worker_id)).fetchone()
            if row is not None:
                state, schedule = after_failure(row["attempts"], row["max_retries"], now, config,
                                                 row["cancel_requested_at"])
                c.execute(f"UPDATE jobs SET state = ?, {_RESCHEDULE}, {ended} WHERE seq = ?",
                          (state.value, *schedule, now.wall, now.wall, o.exit_code, o.error, row["seq"]))
        if row is None:
            return None
        if o.stdout or o.stderr:
            c.execute("INSERT OR REPLACE INTO job_output (seq, stdout, stderr) VALUES (?, ?, ?)",
                      (row["seq"], o.stdout, o.stderr))
        elif row["attempts"] > 1:  # an earlier attempt's output must not pass for this one's
            c.execute("DELETE FROM job_output WHERE seq = ?", (row["seq"],))
        return state

    def requeue(self, worker_id: int, job_ids: Sequence[str], now: Instant | float) -> int:
        """Put this worker's processing jobs back to pending without using an attempt; return how many.

        They keep the due time they were claimed by, so they are ready again at once (unless
        an absolute run_at lies ahead of a wall clock stepped back since).
        """
        with self._write() as c:
            return self._requeue(c, worker_id, job_ids, instant(now))

    @staticmethod
    def _requeue(c, worker_id: int, job_ids: Sequence[str], now: Instant) -> int:
        return sum(
            c.execute(
                "UPDATE jobs SET state = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,"
                " attempts = max(attempts - 1, 0), worker_id = NULL, pgid = NULL, pgid_start = NULL,"
                " started_at = NULL, updated_at = ?, finished_at = CASE WHEN cancel_requested_at IS NULL"
                " THEN finished_at ELSE ? END WHERE id = ? AND worker_id = ? AND state = 'processing'",
                (now.wall, now.wall, job_id, worker_id),
            ).rowcount
            for job_id in job_ids
        )

    # -- workers and recovery -----------------------------------------------------------------

    def register_worker(self, info: dict[str, Any], now: Instant | float, replace: int | None = None,
                        config: dict[str, Any] | None = None, replace_seen: tuple | None = None) -> tuple[int, list]:
        """Register a worker incarnation; return (its id, [(job id, state)] recovered from `replace`).

        `info` has name, host, boot_id, pid, pid_start, slots, queues (list), unit, and
        optionally pid_ns and uid. With `replace`, the dead worker row of that id (same name)
        is removed first and its processing jobs recovered as failed attempts ("worker
        lost"), provided its row still shows `replace_seen` (WorkerInfo.seen) when given.
        Raises Conflict if a worker of that name is registered and is not the one being
        replaced (or beat since it was judged).
        """
        now = instant(now)
        with self._write() as c:
            recovered = []
            if replace is not None:
                if replace_seen is not None and not self._unchanged(c, replace, replace_seen):
                    raise Conflict(f"a worker named {info['name']!r} came back to life; not replacing it")
                recovered = self._recover(c, replace, now, config)
            try:
                cur = c.execute(
                    "INSERT INTO workers (name, host, boot_id, pid, pid_start, pid_ns, uid, slots, queues, unit,"
                    " started_at, heartbeat_at, heartbeat_mono) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (info["name"], info["host"], info["boot_id"], info["pid"], info["pid_start"], info.get("pid_ns"),
                     info.get("uid"), info["slots"], ",".join(info["queues"]), info.get("unit"), now.wall, now.wall,
                     now.mono),
                )
            except sqlite3.IntegrityError:
                raise Conflict(f"a worker named {info['name']!r} is already registered and alive") from None
            return cur.lastrowid, recovered

    def heartbeat(self, worker_id: int, now: Instant | float) -> bool:
        """Record that the worker is alive (and count the beat); return False if its registration is gone."""
        now = instant(now)
        with self._errors():
            cur = self.conn.execute(
                "UPDATE workers SET heartbeat_at = ?, heartbeat_mono = ?, beats = beats + 1 WHERE id = ?",
                (now.wall, now.mono, worker_id))
        return cur.rowcount == 1

    def mark_draining(self, worker_id: int, now: Instant | float) -> None:
        """Record that the worker has begun to drain (claims nothing more)."""
        with self._errors():
            self.conn.execute("UPDATE workers SET draining_since = ? WHERE id = ? AND draining_since IS NULL",
                              (instant(now).wall, worker_id))

    def deregister(self, worker_id: int) -> None:
        """Remove the worker's registration."""
        with self._write() as c:
            c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))

    def worker_pids(self, host: str) -> list[tuple[int, str]]:
        """Return (pid, boot identity) of the workers registered from `host`."""
        with self._errors():
            return [(r[0], r[1]) for r in self.conn.execute("SELECT pid, boot_id FROM workers WHERE host = ?", (host,))]

    def worker_by_name(self, name: str) -> WorkerInfo | None:
        """Return the registered worker called `name`, or None."""
        with self._errors():
            row = self.conn.execute("SELECT * FROM workers WHERE name = ?", (name,)).fetchone()
        return WorkerInfo.from_row(row) if row else None

    def workers(self) -> list[WorkerInfo]:
        """Return every registered worker with the ids of the jobs it is running, by name."""
        with self._errors():
            rows = self.conn.execute("SELECT * FROM workers ORDER BY name").fetchall()
            running: dict[int, list[str]] = {}
            for r in self.conn.execute(
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
            rows = self.conn.execute(
                "SELECT j.id, j.worker_id, j.pgid, j.pgid_start, j.queue, j.attempts, w.host, w.boot_id, w.pid_ns,"
                f" w.uid FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id"
                f" WHERE j.state = 'processing' AND ({where})",
                params,
            ).fetchall()
        return [JobProcess(r["id"], r["worker_id"], r["pgid"], r["pgid_start"], r["host"], r["boot_id"],
                           r["pid_ns"], r["queue"], r["attempts"], r["uid"]) for r in rows]

    def recover(self, worker_id: int | None, seen: tuple | None, now: Instant | float,
                config: dict[str, Any] | None = None) -> list[tuple[str, JobState]]:
        """Recover the processing jobs of a dead worker; return [(job id, new state)].

        The caller judged the worker dead or stale when its row showed `seen`
        (WorkerInfo.seen: its heartbeat count and time); inside the transaction the row
        must still show them, so a worker that beat since keeps its jobs (and a worker
        already recovered by another is left alone).
        `worker_id` None recovers the jobs whose worker row is gone. Each job counts a
        failed attempt, error "worker lost", and follows the retry/DLQ rule; the dead
        worker's registration is removed. `config`, the settings in force as the caller
        read them, spares reading them again.
        """
        now = instant(now)
        with self._write() as c:
            if worker_id is not None and not self._unchanged(c, worker_id, seen):
                return []
            return self._recover(c, worker_id, now, config)

    @staticmethod
    def _unchanged(c, worker_id: int, seen: tuple) -> bool:
        """Return True if the worker's row still shows `seen` (beats, heartbeat_at)."""
        return c.execute("SELECT 1 FROM workers WHERE id = ? AND beats = ? AND heartbeat_at = ?",
                         (worker_id, *seen)).fetchone() is not None

    def _recover(self, c, worker_id: int | None, now: Instant, config=None) -> list[tuple[str, JobState]]:
        config = config or self._settings(c)
        if worker_id is None:
            rows = c.execute(
                "SELECT seq, id, attempts, max_retries, cancel_requested_at FROM jobs WHERE state = 'processing'"
                " AND (worker_id IS NULL OR worker_id NOT IN (SELECT id FROM workers))"
            ).fetchall()
        else:
            rows = c.execute(
                "SELECT seq, id, attempts, max_retries, cancel_requested_at FROM jobs"
                " WHERE state = 'processing' AND worker_id = ?",
                (worker_id,),
            ).fetchall()
            c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))
        recovered = []
        for r in rows:
            state, schedule = after_failure(r["attempts"], r["max_retries"], now, config, r["cancel_requested_at"])
            c.execute(
                f"UPDATE jobs SET state = ?, {_RESCHEDULE}, updated_at = ?, finished_at = ?,"
                " exit_code = NULL, last_error = ?, worker_id = NULL, pgid = NULL, pgid_start = NULL"
                " WHERE seq = ?",
                (state.value, *schedule, now.wall, now.wall,
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
            row = self.conn.execute(sql + " WHERE j.id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job with id {job_id!r}")
        return Job.from_row(row)

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
            rows = self.conn.execute(sql + " ORDER BY seq DESC LIMIT ?", (*params, limit)).fetchall()
        return [Job.from_row(r) for r in rows]

    def oldest_ready(self, now: Instant | float) -> dict[str, float]:
        """Return {queue: seconds the oldest ready job has waited since its run_at} (queue latency).

        Ready as a claim sees it, paused queues included (they are waiting too).
        """
        now = instant(now)
        with self._errors():
            rows = self.conn.execute(
                f"SELECT queue, min(run_at) FROM jobs INDEXED BY jobs_ready WHERE {_READY} AND {_DUE}"
                " GROUP BY queue ORDER BY queue", _due_params(now)).fetchall()
        return {q: max(0.0, now.wall - run_at) for q, run_at in rows}

    def run_counts(self) -> dict[str, dict[str, int]]:
        """Return {queue: {outcome: runs}}: how runs ended, kept apart from the jobs (retention does not lower it)."""
        with self._errors():
            rows = self.conn.execute("SELECT queue, outcome, n FROM job_runs ORDER BY queue, outcome").fetchall()
        out: dict[str, dict[str, int]] = {}
        for q, outcome, n in rows:
            out.setdefault(q, {})[outcome] = n
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Return {queue: {state: count}} for every queue that has jobs (zero counts left out)."""
        with self._errors():
            rows = self.conn.execute("SELECT queue, state, n FROM job_counts WHERE n > 0 ORDER BY queue").fetchall()
        out: dict[str, dict[str, int]] = {}
        for r in rows:
            out.setdefault(r["queue"], {})[r["state"]] = r["n"]
        return out

    # -- dead letter queue -----------------------------------------------------------------------

    def retry(self, job_ids: Sequence[str], now: Instant | float,
              states: Sequence[JobState] = (JobState.DEAD, JobState.CANCELLED)) -> None:
        """Move dead or cancelled jobs (those of `states`) back to pending, attempts reset to 0, due at once.

        All or none: raises NotFound for an unknown id, Conflict for a job in another state;
        then nothing changes.
        """
        now = instant(now)
        allowed = [s.value for s in states]
        marks = ", ".join("?" * len(allowed))
        with self._write() as c:
            for job_id in job_ids:
                n = c.execute(
                    f"UPDATE jobs SET state = 'pending', attempts = 0, {_RESCHEDULE}, updated_at = ?,"
                    f" cancel_requested_at = NULL WHERE id = ? AND state IN ({marks})",
                    (*schedule(now, 0.0), now.wall, job_id, *allowed),
                ).rowcount
                if n == 0:
                    row = c.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
                    if row is None:
                        raise NotFound(f"no job with id {job_id!r}")
                    raise Conflict(f"job {job_id!r} is {row['state']}, not {' or '.join(allowed)};"
                                   f" only {' or '.join(allowed)} jobs can be retried")

    def dlq_retry(self, job_ids: Sequence[str], now: Instant | float) -> None:
        """Move dead jobs back to pending (retry, for the dead letter queue alone)."""
        self.retry(job_ids, now, (JobState.DEAD,))

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
            return [self._cancel_one(c, job_id, now) for job_id in job_ids]

    def cancel_matching(self, queue: str | None, states: Sequence[JobState], now: Instant | float) -> list[CancelResult]:
        """Cancel every job in `states` (pending, failed, processing) of `queue` (None: every queue)."""
        now = instant(now)
        where, params = _queue_filter(f"state IN ({', '.join('?' * len(states))})", [s.value for s in states],
                                      [queue] if queue else [])
        with self._write() as c:
            ids = [r[0] for r in c.execute(f"SELECT id FROM jobs WHERE {where} ORDER BY seq", params)]
            return [self._cancel_one(c, job_id, now) for job_id in ids]

    @staticmethod
    def _cancel_one(c, job_id: str, now: Instant) -> CancelResult:
        row = c.execute("SELECT j.seq, j.state, j.cancel_requested_at, w.name, w.host, w.pid, w.boot_id FROM jobs j"
                        " LEFT JOIN workers w ON w.id = j.worker_id WHERE j.id = ?", (job_id,)).fetchone()
        if row is None:
            return CancelResult(job_id, None, "error", f"no job with id {job_id!r}")
        state = JobState(row["state"])
        if state in (JobState.PENDING, JobState.FAILED):
            c.execute("UPDATE jobs SET state = 'cancelled', updated_at = ?, finished_at = ?, last_error = 'cancelled',"
                      " delay = NULL, due_boot = NULL, due_mono = NULL WHERE seq = ?", (now.wall, now.wall, row["seq"]))
            return CancelResult(job_id, state, "cancelled")
        if state == JobState.PROCESSING:
            if row["cancel_requested_at"] is None:
                c.execute("UPDATE jobs SET cancel_requested_at = ? WHERE seq = ?", (now.wall, row["seq"]))
            return CancelResult(job_id, state, "requested", worker=row["name"],
                                worker_host=row["host"], worker_pid=row["pid"], worker_boot=row["boot_id"])
        return CancelResult(job_id, state, "error", f"job {job_id!r} is {state.value}; only pending, failed and"
                                                    " processing jobs can be cancelled")

    def cancel_requests(self, worker_id: int) -> list[str]:
        """Return the ids of this worker's processing jobs whose cancel was requested."""
        with self._errors():
            return [r[0] for r in self.conn.execute(
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
                elif not paused and was_paused:
                    c.execute("DELETE FROM queues WHERE name = ?", (q,))
                out.append(paused != was_paused)
            return out

    def paused_queues(self) -> dict[str, float]:
        """Return {queue: paused since (Unix seconds)} of the paused queues."""
        with self._errors():
            return {r[0]: r[1] for r in self.conn.execute(
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
                    f"DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_finished WHERE {where}"
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
                n += self.conn.execute(f"SELECT count(*) FROM jobs INDEXED BY jobs_finished WHERE {where}",
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

    def reclaim_space(self, max_pages: int | None = None, min_free: float = 0.0) -> int:
        """Give freed pages back to the filesystem and cut the WAL back; return the pages given back.

        Pages go back only once free pages are at least `min_free` of the file (a fraction):
        while jobs keep coming, the pages that retention frees are soon reused, and moving
        pages to return them would only cost writes. That needs incremental auto_vacuum
        (every database created with schema 4 or later; `vacuum_to_incremental` converts
        older ones). The WAL is checkpointed and truncated either way; the checkpoint waits
        at most a second for readers, so it neither starves nor stalls the workers.
        """
        pages = 0
        with self._errors():
            if self.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
                if free and free >= min_free * self.conn.execute("PRAGMA page_count").fetchone()[0]:
                    pages = free if max_pages is None else min(free, max_pages)
                    # executescript steps the pragma to its end; execute() would free one page only.
                    self.conn.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
            self.conn.execute("PRAGMA busy_timeout = 1000")
            try:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return pages

    def vacuum_to_incremental(self) -> str | None:
        """Convert a database made before incremental auto_vacuum with a one-time VACUUM.

        Returns None when there is nothing to do, else one line saying what was done, or
        why not: VACUUM rewrites the whole file, through the WAL, so it needs free disk of
        about twice the file's size. Blocks other writers while it runs.
        """
        with self._errors():
            if self.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                return None
            size = os.path.getsize(self.path)
            st = os.statvfs(os.path.dirname(self.path))
            free = st.f_bavail * st.f_frsize
            if free < 2 * size:
                return (f"not compacted: converting {self.path} to incremental auto_vacuum needs about"
                        f" {2 * size / 2**20:.0f} MiB free on its filesystem, which has {free / 2**20:.0f} MiB;"
                        " freed pages are reused meanwhile")
            self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return f"compacted {self.path}: {size / 2**20:.1f} -> {os.path.getsize(self.path) / 2**20:.1f} MiB"

    # -- settings ---------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """Return every setting's value in force (stored or default), by canonical key.

        Raises InvalidConfig if a stored value is not valid (for example edited by hand).
        """
        with self._errors():
            return self._settings(self.conn)

    def _settings(self, c, skip: str | None = None) -> dict[str, Any]:
        values = dict(self.defaults)
        for r in c.execute("SELECT key, value FROM config WHERE key IS NOT ?", (skip,)):
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


def _finished_filter(state: str, before: float, queue: str | None) -> tuple[str, list]:
    """WHERE for jobs of `state` that finished before `before` (Unix s), of `queue` if given.

    It repeats the jobs_finished partial index's WHERE, so that SQLite can use the index
    (its planner needs the index's terms in the query, https://www.sqlite.org/partialindex.html).
    """
    return _queue_filter(f"{_FINISHED} AND state = ? AND finished_at < ?", [state, before], [queue] if queue else [])


def _queue_filter(where: str, params: list, queues: Sequence[str]) -> tuple[str, list]:
    if queues:
        where += f" AND queue IN ({', '.join('?' * len(queues))})"
        params = [*params, *queues]
    return where, params


#: Sets a job's due time from _schedule's four values (a dead job's run_at is kept).
_RESCHEDULE = "run_at = coalesce(?, run_at), delay = ?, due_boot = ?, due_mono = ?"


def _due_params(now: Instant) -> list:
    """The parameters of _DUE at `now`."""
    return [now.domain, now.mono, now.wall, now.wall]


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (triggers hold inner semicolons)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return [s for s in out if s]


def _check_path(path: str) -> None:
    """Raise InvalidInput unless `path` can hold a database this user can write."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise InvalidInput(f"database directory {directory} does not exist")
    if os.path.isdir(path):
        raise InvalidInput(f"database path {path} is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        raise InvalidInput(f"database path {path} is not a regular file")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionDenied(f"permission denied: cannot use database directory {directory}{_group_hint(directory)}")
    if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
        raise PermissionDenied(f"permission denied: cannot read and write database {path}{_group_hint(path)}")


def _group_hint(path: str) -> str:
    """Say which group may use `path` when it is group-writable (as /var/lib/queuectl is)."""
    try:
        st = os.stat(path)
        if not st.st_mode & 0o020:
            return ""
        return f" (members of group {grp.getgrgid(st.st_gid).gr_name} may use it)"
    except (OSError, KeyError):
        return ""


def _create_file(path: str) -> None:
    """Create an empty database file with mode 0666 less the umask, if there is none.

    SQLite itself creates new databases 0644 whatever the umask, and gives the -wal and
    -shm files the database's mode; creating the file first lets a group share it
    (a service with UMask=0007 makes it 0660).
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        pass
    except OSError as e:
        raise InvalidInput(f"cannot create database {path}: {e.strerror}") from None


def default_db_path() -> str:
    """Return $XDG_DATA_HOME/queuectl/queuectl.db (XDG_DATA_HOME defaults to ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "queuectl", "queuectl.db")


__all__ = ["SqliteStore", "default_db_path", "BUSY_TIMEOUT", "WAL_SIZE_LIMIT"]
