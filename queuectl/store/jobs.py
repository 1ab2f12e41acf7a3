"""Jobs in the store: enqueue (keys, dependencies) and the reads of jobs, their output and their counts."""

from __future__ import annotations

from typing import Sequence

from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import DatabaseError, NotFound
from queuectl.domain.jobspec import NewJob
from queuectl.domain.models import Job, JobState
from queuectl.store.shared_schema import KEY_HELD, dependency_failed
from queuectl.store import fragments
from queuectl.store.base import DuplicateJob, Enqueued, FollowedOutput, UnknownDependency, due_on_monotonic
from queuectl.store.core import DUE, JOB_COLUMNS, SqlCore, due_params


def enqueue(db: SqlCore, jobs: Sequence[NewJob], now: Instant | float) -> list[Enqueued]:
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
        with db._write() as c:
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
                deps, start = _dependencies(db, c, job, index, holders, now) if job.after else ([], _READY_NOW)
                result, seq = _insert_one(c, job, (*row, *start))
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
                db._notify(c)
    except db.UniqueViolation as e:
        with db._errors():
            index = _first_duplicate(db, [j.id for j in jobs])
        if index is None:
            raise DatabaseError(f"database {db.describe()}: {e}") from None
        raise DuplicateJob(jobs[index].id, index) from None
    return done


def _dependencies(db: SqlCore, c, job: NewJob, index: int, holders: dict[str, str], now: Instant) -> tuple[list, tuple]:
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
        f" ORDER BY seq{db.FOR_UPDATE}) RETURNING seq, id, state", ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise UnknownDependency(job.id, missing[0], index)
    failed = next((i for i in ids if found[i][1] in (JobState.DEAD, JobState.CANCELLED)), None)
    seqs = [found[i][0] for i in ids]
    if failed is not None:
        return seqs, ("cancelled", 0, now.wall, dependency_failed(failed, found[failed][1].value))
    blockers = sum(found[i][1] != JobState.COMPLETED for i in ids)
    return seqs, ("blocked" if blockers else "pending", blockers, None, None)


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


def _first_duplicate(db: SqlCore, ids: list[str]) -> int | None:
    """Return the index of the first id that exists already or repeats an earlier one, or None."""
    seen: set[str] = set()
    for index, job_id in enumerate(ids):
        if job_id in seen or db.c.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone():
            return index
        seen.add(job_id)
    return None


def get_job(db: SqlCore, job_id: str, output: bool = False) -> Job:
    """Return the job `job_id` (with its captured output if `output`); raises NotFound."""
    cols = ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))
    sql = f"SELECT {cols}"
    if output:
        sql += ", o.stdout, o.stderr FROM jobs j LEFT JOIN job_output o ON o.seq = j.seq"
    else:
        sql += " FROM jobs j"
    with db._errors():
        row = db.c.execute(sql + " WHERE j.id = ?", (job_id,)).fetchone()
    if row is None:
        raise NotFound(f"no job with id {job_id!r}")
    return with_after(db, [Job.from_row(row)])[0]


def with_after(db: SqlCore, jobs: list[Job]) -> list[Job]:
    """`jobs` with their dependencies' ids (Job.after) read in."""
    if not jobs:
        return jobs
    after: dict[int, list[str]] = {}
    with db._errors():
        for at in range(0, len(jobs), 500):
            chunk = [j.seq for j in jobs[at:at + 500]]
            for r in db.c.execute(
                    "SELECT d.seq, p.id FROM job_deps d JOIN jobs p ON p.seq = d.after_seq"
                    f" WHERE d.seq IN ({', '.join('?' * len(chunk))}) ORDER BY p.seq", chunk):
                after.setdefault(r[0], []).append(r[1])
    return [j._replace(after=tuple(after[j.seq])) if j.seq in after else j for j in jobs]


def jobs_by_id(db: SqlCore, job_ids: Sequence[str]) -> dict[str, Job]:
    """Return the jobs of `job_ids` that exist, by id (without output); 500 ids per query."""
    found: dict[str, Job] = {}
    ids = list(dict.fromkeys(job_ids))
    with db._errors():
        for at in range(0, len(ids), 500):
            chunk = ids[at:at + 500]
            rows = db.c.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id IN ({', '.join('?' * len(chunk))})",
                                  chunk).fetchall()
            found.update((r["id"], Job.from_row(r)) for r in rows)
    return found


def held_keys(db: SqlCore, limit: int = 100) -> tuple[list[tuple[str, str, JobState]], int]:
    """Return ([(key, job id, state)] of up to `limit` held keys by key, how many keys are held in all).

    Held: by a job not yet ended (schema.KEY_HELD, the jobs_key_held index's WHERE)."""
    with db._errors():
        rows = db.c.execute(f"SELECT key, id, state FROM jobs WHERE {KEY_HELD} ORDER BY key LIMIT ?",
                              (limit,)).fetchall()
        total = db.c.execute(f"SELECT count(*) FROM jobs WHERE {KEY_HELD}").fetchone()[0]
    return [(r[0], r[1], JobState(r[2])) for r in rows], total


def list_jobs(db: SqlCore, state: JobState | None = None, queue: str | None = None, limit: int = 100) -> list[Job]:
    """Return up to `limit` jobs, newest first, optionally of one state and/or queue: dead jobs (the dead letter
    queue) by when they died, most recent first (finished_at, on the jobs_finished index), others by seq."""
    where, params = [], []
    order, index = "seq DESC", ""
    if state is JobState.DEAD:
        # The partial index's WHERE repeated, so that SQLite can use it (as operator.py's purge does).
        where += [fragments.FINISHED_STATES, "state = ?"]
        params.append(state.value)
        order, index = "finished_at DESC, seq DESC", db.FINISHED_INDEX
    elif state is not None:
        where.append("state = ?")
        params.append(state.value)
    if queue is not None:
        where.append("queue = ?")
        params.append(queue)
    sql = f"SELECT {JOB_COLUMNS} FROM jobs {index}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    with db._errors():
        rows = db.c.execute(sql + f" ORDER BY {order} LIMIT ?", (*params, limit)).fetchall()
    return with_after(db, [Job.from_row(r) for r in rows])


def oldest_ready(db: SqlCore, now: Instant | float) -> dict[str, float]:
    """Return {queue: seconds the oldest ready job has waited since its run_at} (queue latency).

    Ready as a claim sees it, paused queues included (they are waiting too).
    """
    now = instant(now)
    with db._errors():
        rows = db.c.execute(
            f"SELECT queue, min(run_at) FROM jobs {db.READY_INDEX} WHERE {fragments.READY_STATES} AND {DUE}"
            " GROUP BY queue ORDER BY queue", due_params(now)).fetchall()
    return {q: max(0.0, now.wall - run_at) for q, run_at in rows}


def run_counts(db: SqlCore) -> dict[str, dict[str, int]]:
    """Return {queue: {outcome: runs}}: how runs ended, kept apart from the jobs (retention does not lower it)."""
    with db._errors():
        rows = db.c.execute(f"SELECT queue, outcome, n FROM {db.RUNS_FROM} ORDER BY queue, outcome").fetchall()
    out: dict[str, dict[str, int]] = {}
    for q, outcome, n in rows:
        out.setdefault(q, {})[outcome] = n
    return out


def counts(db: SqlCore) -> dict[str, dict[str, int]]:
    """Return {queue: {state: count}} for every queue that has jobs (zero counts left out)."""
    with db._errors():
        rows = db.c.execute(f"SELECT queue, state, n FROM {db.COUNTS_FROM} WHERE n > 0 ORDER BY queue"
                              ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        out.setdefault(r["queue"], {})[r["state"]] = r["n"]
    return out


def read_output(db: SqlCore, job_id: str, attempt: int | None,
                positions: tuple[int, int]) -> tuple[Job, FollowedOutput | None]:
    """Read job `job_id` and, in the same statement, its stored output that follows `positions` (bytes of
    stdout and stderr already read) when that output is still of `attempt`; else all of it.

    For `logs --follow`: what a running job writes reaches the store within about
    worker.OUTPUT_EVERY seconds; once the job has ended its output is final. Raises NotFound.
    """
    cols = ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))

    def start(name: str, position: str) -> str:  # from which byte of the stored tail to read
        total = f"coalesce(o.{name}_total, length(o.{name}))"
        return (f"CASE WHEN o.attempt = ? AND {total} - {position} < length(o.{name})"
                f" THEN CAST(length(o.{name}) - ({total} - {position}) + 1 AS INTEGER) ELSE 1 END")

    with db._errors():
        row = db.c.execute(
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


def insert_run(c, job: NewJob, now: Instant) -> bool:
    """Insert a schedule's run, ready when due; False, adding nothing, if its id exists or its key is held."""
    return c.execute(f"{_INSERT} ON CONFLICT DO NOTHING RETURNING seq", (*_row(job, now), *_READY_NOW)
                     ).fetchone() is not None


#: A new job (parameters: SqlStore.enqueue's rows, then state, blockers, finished_at, last_error).
_INSERT = ("INSERT INTO jobs (id, queue, command, priority, max_retries, timeout, cwd, run_at,"
           " delay, due_boot, due_mono, created_at, updated_at, key, state, blockers, finished_at, last_error)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")

#: The last four values of _INSERT for a job that is ready when due.
_READY_NOW = ("pending", 0, None, None)


def _row(j: NewJob, now: Instant) -> tuple:
    """The first values of _INSERT for new job `j` enqueued at `now` (see SqlStore.enqueue)."""
    return (j.id, j.queue, j.command, j.priority, j.max_retries, j.timeout, j.cwd,
            j.run_at if j.delay is None else now.wall + j.delay, j.delay,
            *due_on_monotonic(now, j.delay), now.wall, now.wall, j.key)
