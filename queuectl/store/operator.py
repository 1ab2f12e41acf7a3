"""An operator's actions in the store: retry (and the dead letter queue's), cancel, pause and resume queues,
purge finished jobs."""

from __future__ import annotations

from typing import Sequence

from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import Conflict, InvalidInput, NotFound
from queuectl.domain.models import JobState
from queuectl.store.shared_schema import KEY_HELD
from queuectl.store import fragments
from queuectl.store.base import PURGE_BATCH, CancelResult, schedule
from queuectl.store.core import OUTPUT_BEFORE, RESCHEDULE, SqlCore, queue_filter


def retry(db: SqlCore, job_ids: Sequence[str], now: Instant | float,
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
    with db._write() as c:
        seqs = []
        for job_id in job_ids:
            _check_key_free(c, job_id)
            row = c.execute(
                f"UPDATE jobs SET state = 'pending', attempts = 0, {RESCHEDULE}, updated_at = ?,"
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
        c.executemany(f"{OUTPUT_BEFORE} ?", [(seq,) for seq in seqs])
        blocked = _block_again(db, c, seqs, now)
        db._notify(c)
    return [JobState.BLOCKED if seq in blocked else JobState.PENDING for seq in seqs]


def _block_again(db: SqlCore, c, seqs: list[int], now: Instant) -> set[int]:
    """Put the jobs of `seqs` that have dependencies not yet completed back to blocked, and return
    their seqs; raise Conflict for one with a dependency dead or cancelled.

    The dependencies' rows are locked first (on PostgreSQL): a completion of one in flight is
    then committed before they are counted, or waits and sees the job blocked."""
    blocked: set[int] = set()
    with_deps = [r[0] for r in c.execute(
        f"SELECT DISTINCT seq FROM job_deps WHERE seq IN ({', '.join('?' * len(seqs))})", seqs)] if seqs else []
    for seq in with_deps:
        deps = c.execute(f"SELECT id, state FROM jobs WHERE seq IN (SELECT after_seq FROM job_deps WHERE seq = ?)"
                         f" ORDER BY seq{db.FOR_SHARE}", (seq,)).fetchall()
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


def _check_key_free(c, job_id: str) -> None:
    """Raise Conflict if job `job_id` has a key that another job, not yet ended, holds now."""
    holder = c.execute(f"SELECT id, state, key FROM jobs WHERE key = (SELECT key FROM jobs WHERE id = ?)"
                       f" AND id <> ? AND {KEY_HELD}", (job_id, job_id)).fetchone()
    if holder is not None:
        raise Conflict(f"job {job_id!r} cannot be retried: its key {holder['key']!r} is held by job"
                       f" {holder['id']!r} ({holder['state']}) until that one ends")


def dlq_retry(db: SqlCore, job_ids: Sequence[str], now: Instant | float) -> list[JobState]:
    """Move dead jobs back to pending (retry, for the dead letter queue alone)."""
    return retry(db, job_ids, now, (JobState.DEAD,))


def cancel(db: SqlCore, job_ids: Sequence[str], now: Instant | float) -> list[CancelResult]:
    """Cancel jobs by id, in one transaction; return what happened to each, in order.

    Pending and failed jobs are cancelled at once. For a processing job the request is
    recorded: its worker stops it and records it cancelled (or completed, if it exited 0
    first); a recovery finishes the cancel if the worker dies. Completed, dead and
    cancelled jobs, and unknown ids, are left alone and reported with an error; the
    others are cancelled all the same.
    """
    now = instant(now)
    with db._write() as c:
        return _cancel_all(db, c, job_ids, now)


def _cancel_all(db: SqlCore, c, job_ids: Sequence[str], now: Instant) -> list[CancelResult]:
    """Cancel each job, newest first (a dependant before its dependencies, which would cancel it
    on their own); return the results in the order of `job_ids`."""
    seqs: dict[str, int] = {}
    for at in range(0, len(job_ids), 500):
        chunk = list(job_ids[at:at + 500])
        seqs.update((r[0], r[1]) for r in c.execute(
            f"SELECT id, seq FROM jobs WHERE id IN ({', '.join('?' * len(chunk))})", chunk))
    done = {job_id: _cancel_one(c, job_id, now)
            for job_id in sorted(dict.fromkeys(job_ids), key=lambda i: -seqs.get(i, 0))}
    results = [done[job_id] for job_id in job_ids]
    if any(r.result == "requested" for r in results):
        db._notify(c)  # the owning workers look for cancel requests when woken
    return results


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


def set_paused(db: SqlCore, queues: Sequence[str], paused: bool, now: Instant | float) -> list[bool]:
    """Pause or resume queues; return for each whether it changed (False: it already was)."""
    now = instant(now)
    with db._write() as c:
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
            db._notify(c)
        return out


def paused_queues(db: SqlCore) -> dict[str, float]:
    """Return {queue: paused since (Unix seconds)} of the paused queues."""
    with db._errors():
        return {r[0]: r[1] for r in db.c.execute(
            "SELECT name, paused_at FROM queues WHERE paused_at IS NOT NULL ORDER BY name")}


def purge(db: SqlCore, older_than: dict[str, float], now: Instant | float, queue: str | None = None,
          limit: int = PURGE_BATCH) -> int:
    """Delete up to `limit` finished jobs, oldest first, in one transaction; return how many.

    `older_than` maps completed, cancelled or dead to an age in seconds: jobs of that
    state that finished longer ago are deleted, with their output; their run counts
    stay. Pending, processing and failed jobs are never deleted. Ages are on the wall
    clock. Raises InvalidInput for another state.
    """
    now, deleted = instant(now), 0
    with db._write() as c:
        for state, age in older_than.items():
            if state not in ("completed", "cancelled", "dead"):
                raise InvalidInput(f"only completed, cancelled and dead jobs can be purged, not {state}")
            where, params = _finished_filter(state, now.wall - age, queue)
            deleted += c.execute(
                f"DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs {db.FINISHED_INDEX} WHERE {where}"
                " ORDER BY finished_at LIMIT ?)", (*params, limit - deleted)).rowcount
            if deleted >= limit:
                break
    return deleted


def count_purgeable(db: SqlCore, older_than: dict[str, float], now: Instant | float, queue: str | None = None) -> int:
    """Return how many jobs `purge` would delete in all, given no limit (for --dry-run)."""
    now, n = instant(now), 0
    with db._errors():
        for state, age in older_than.items():
            where, params = _finished_filter(state, now.wall - age, queue)
            n += db.c.execute(f"SELECT count(*) FROM jobs {db.FINISHED_INDEX} WHERE {where}",
                                params).fetchone()[0]
    return n


def _finished_filter(state: str, before: float, queue: str | None) -> tuple[str, list]:
    """WHERE for jobs of `state` that finished before `before` (Unix s), of `queue` if given.

    It repeats the jobs_finished partial index's WHERE, so that SQLite can use the index
    (its planner needs the index's terms in the query, https://www.sqlite.org/partialindex.html).
    """
    return queue_filter(f"{fragments.FINISHED_STATES} AND state = ? AND finished_at < ?", [state, before], [queue] if queue else [])
