"""Workers in the store: registration, heartbeats, the jobs each holds, recovery of a dead worker's jobs,
cancel requests a worker looks for, and leases for work one worker at a time does."""

from __future__ import annotations

from typing import Any

from queuectl.domain.backoff import last_attempt
from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import Conflict
from queuectl.domain.models import JobState, StoppedWorker, WorkerInfo
from queuectl.store.base import JobProcess, after_failure, cancel_wins
from queuectl.store import fragments
from queuectl.store.core import RELEASED, RESCHEDULE, SqlCore
from queuectl.store.shared_schema import RECOVERED
from queuectl.store.timing import placeholders
from queuectl.store.settings import read_settings

#: A recovered job: retried, dead or cancelled, its end on the caller's clock, its outcome code RECOVERED (None
#: for a cancelled one, counted as cancelled). Parameters: state, attempts, started_at if none is recorded,
#: RESCHEDULE's, fragments.ENDED_SET's, end_code, seq.
_RECOVERED = placeholders(f"UPDATE jobs SET state = ?, attempts = ?, started_at = coalesce(started_at, ?), {RESCHEDULE},"
                          f" {fragments.ENDED_SET.replace('end_code = NULL', 'end_code = ?')} WHERE seq = ?")[0]


#: The workers that ended kept at most (the newest; `status` shows those of the last STOPPED_SHOWN_FOR seconds).
KEEP_STOPPED = 100
#: How each end of a worker is kept (stopped_workers.ended).
ENDINGS = ("drained", "forced", "burst", "lost")
#: Copies a registration that ends into stopped_workers (parameters: stopped_at, ended, the worker's id), and keeps
#: the newest KEEP_STOPPED rows (parameter: KEEP_STOPPED, the offset of the newest row to go).
_KEEP_ENDED = ("INSERT INTO stopped_workers (worker_id, name, host, pid, unit, started_at, stopped_at, ended)"
               " SELECT id, name, host, pid, unit, started_at, ?, ? FROM workers WHERE id = ?")
_TRIM_ENDED = ("DELETE FROM stopped_workers WHERE seq <= (SELECT seq FROM stopped_workers ORDER BY seq DESC"
               " LIMIT 1 OFFSET ?)")


def register_worker(db: SqlCore, info: dict[str, Any], now: Instant | float, replace: int | None = None,
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
    with db._write() as c:
        recovered = []
        if replace is not None:
            if replace_seen is None or _unchanged(db, c, replace, replace_seen):
                recovered = _recover(db, c, replace, now, config)
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
        except db.UniqueViolation:
            raise Conflict(f"a worker named {info['name']!r} is already registered and alive") from None
        return cur.fetchone()[0], recovered


def heartbeat(db: SqlCore, worker_id: int, now: Instant | float) -> bool:
    """Record that the worker is alive (and count the beat); return False if its registration is gone."""
    now = instant(now)
    with db._errors():
        cur = db.c.execute(
            "UPDATE workers SET heartbeat_at = ?, heartbeat_mono = ?, beats = beats + 1 WHERE id = ?",
            (now.wall, now.mono, worker_id))
    return cur.rowcount == 1


def mark_draining(db: SqlCore, worker_id: int, now: Instant | float) -> None:
    """Record that the worker has begun to drain (claims nothing more)."""
    with db._errors():
        db.c.execute("UPDATE workers SET draining_since = ? WHERE id = ? AND draining_since IS NULL",
                       (instant(now).wall, worker_id))


def deregister(db: SqlCore, worker_id: int, ended: str = "drained", now: Instant | float | None = None) -> None:
    """Remove the worker's registration; keep that it ended, how (`ended`: drained, forced or burst) and when
    (`now`, default the store's clock), for `status` (stopped_workers). Raises ValueError for another `ended`.
    """
    if ended not in ENDINGS:
        raise ValueError(f"a worker ends drained, forced, burst or lost, not {ended!r}")
    wall = db.clock() if now is None else instant(now).wall
    with db._write() as c:
        _keep_ended(c, worker_id, ended, wall)
        c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))


def _keep_ended(c, worker_id: int, ended: str, wall: float) -> None:
    """Copy registration `worker_id`, which ends now (`wall`), into stopped_workers; keep its newest rows."""
    c.execute(_KEEP_ENDED, (wall, ended, worker_id))
    c.execute(_TRIM_ENDED, (KEEP_STOPPED,))


def stopped_workers(db: SqlCore, since: float, limit: int = 20) -> list[StoppedWorker]:
    """Return up to `limit` workers that ended at or after `since` (Unix seconds, the store's clock), newest
    first (of the newest KEEP_STOPPED kept)."""
    with db._errors():
        rows = db.c.execute("SELECT name, host, pid, unit, started_at, stopped_at, ended FROM stopped_workers"
                              " WHERE stopped_at >= ? ORDER BY seq DESC LIMIT ?", (since, limit)).fetchall()
    return [StoppedWorker(*r) for r in rows]


def worker_pids(db: SqlCore, host: str) -> list[tuple[int, str]]:
    """Return (pid, boot identity) of the workers registered from `host`."""
    with db._errors():
        return [(r[0], r[1]) for r in db.c.execute("SELECT pid, boot_id FROM workers WHERE host = ?", (host,))]


def worker_by_name(db: SqlCore, name: str) -> WorkerInfo | None:
    """Return the registered worker called `name`, or None."""
    with db._errors():
        row = db.c.execute("SELECT * FROM workers WHERE name = ?", (name,)).fetchone()
    return WorkerInfo.from_row(row) if row else None


def workers(db: SqlCore) -> list[WorkerInfo]:
    """Return every registered worker with the ids of the jobs it is running, by name."""
    with db._errors():
        rows = db.c.execute("SELECT * FROM workers ORDER BY name").fetchall()
        running: dict[int, list[str]] = {}
        for r in db.c.execute(
            "SELECT worker_id, id FROM jobs WHERE state = 'processing' ORDER BY started_at, seq"
        ):
            running.setdefault(r["worker_id"], []).append(r["id"])
    return [WorkerInfo.from_row(r, running.get(r["id"], ())) for r in rows]


def worker_jobs(db: SqlCore, worker_id: int) -> list[JobProcess]:
    """Return the processing jobs of worker `worker_id`."""
    return _job_processes(db, "j.worker_id = ?", (worker_id,))


def orphaned_jobs(db: SqlCore) -> list[JobProcess]:
    """Return processing jobs whose worker's registration is gone (their host fields are None)."""
    return _job_processes(db, "w.id IS NULL", ())


def _job_processes(db: SqlCore, where: str, params: tuple) -> list[JobProcess]:
    with db._errors():
        rows = db.c.execute(
            "SELECT j.id, j.worker_id, j.pgid, j.pgid_start, j.queue, j.attempts, w.host, w.boot_id, w.pid_ns,"
            f" w.uid, w.pid, j.started_at FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id"
            f" WHERE j.state = 'processing' AND ({where})",
            params,
        ).fetchall()
    return [JobProcess(r["id"], r["worker_id"], r["pgid"], r["pgid_start"], r["host"], r["boot_id"],
                       r["pid_ns"], r["queue"], r["attempts"], r["uid"], r["started_at"] is not None, r["pid"])
            for r in rows]


def recover(db: SqlCore, worker_id: int | None, seen: tuple | None, now: Instant | float,
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
    ran: back to pending, no attempt counted; queuectl.domain.backoff.last_attempt). A job that kills
    its worker at once thus runs at most max_retries + 1 times. The dead worker's
    registration is removed. `config`, the settings in force as the caller
    read them, spares reading them again.
    """
    now = instant(now)
    with db._write() as c:
        if worker_id is not None and not _unchanged(db, c, worker_id, seen):
            return []
        return _recover(db, c, worker_id, now, config)


def _unchanged(db: SqlCore, c, worker_id: int, seen: tuple) -> bool:
    """Return True if the worker's row still shows `seen` (beats, heartbeat_at); lock it for the recovery."""
    return c.execute(f"SELECT 1 FROM workers WHERE id = ? AND beats = ? AND heartbeat_at = ?{db.FOR_UPDATE}",
                     (worker_id, *seen)).fetchone() is not None


def _recover(db: SqlCore, c, worker_id: int | None, now: Instant, config=None) -> list[tuple[str, JobState]]:
    config = config or read_settings(c, db.defaults)
    if worker_id is None:
        rows = c.execute(
            "SELECT seq, id, attempts, max_retries, cancel_requested_at, started_at FROM jobs"
            " WHERE state = 'processing'"
            f" AND (worker_id IS NULL OR worker_id NOT IN (SELECT id FROM workers)){db.FOR_UPDATE}"
        ).fetchall()
    else:
        # The registration goes first: on PostgreSQL that waits for a claim of this worker
        # in flight (it holds a share lock on the row), whose jobs the next read then sees.
        _keep_ended(c, worker_id, "lost", now.wall)
        c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))
        rows = c.execute(
            "SELECT seq, id, attempts, max_retries, cancel_requested_at, started_at FROM jobs"
            f" WHERE state = 'processing' AND worker_id = ?{db.FOR_UPDATE}",
            (worker_id,),
        ).fetchall()
    recovered = []
    for r in rows:
        unstarted = r["started_at"] is None  # claimed, and no start recorded (it may have run)
        if unstarted and (r["cancel_requested_at"] is not None
                          or last_attempt(r["attempts"], r["max_retries"], config)):
            # Not run: a cancel was asked before its start, or it was to run its last attempt,
            # whose start the worker records first (queuectl.domain.backoff.last_attempt).
            c.execute(f"UPDATE jobs SET {RELEASED}, updated_at = ? WHERE seq = ?", (now.wall, now.wall, r["seq"]))
            recovered.append((r["id"], cancel_wins(JobState.PENDING, r["cancel_requested_at"])))
            continue
        attempts = r["attempts"] + unstarted  # lost before its start was recorded: it may have run
        state, schedule = after_failure(attempts, r["max_retries"], now, config, r["cancel_requested_at"])
        cancelled = state == JobState.CANCELLED
        c.execute(_RECOVERED, (state.value, attempts, now.wall, *schedule, now.wall, now.wall, None,
                               "cancelled; worker lost" if cancelled else "worker lost",
                               None if cancelled else RECOVERED, r["seq"]))
        recovered.append((r["id"], state))
    return recovered


def cancel_requests(db: SqlCore, worker_id: int) -> list[str]:
    """Return the ids of this worker's processing jobs whose cancel was requested."""
    with db._errors():
        return [r[0] for r in db.c.execute(
            "SELECT id FROM jobs WHERE worker_id = ? AND state = 'processing' AND cancel_requested_at IS NOT NULL",
            (worker_id,))]


def take_lease(db: SqlCore, name: str, holder: int, now: Instant | float, ttl: float) -> bool:
    """Take or renew the lease `name` for `holder` (a worker id) for `ttl` seconds; False if another holds it.

    For work that one worker at a time does (retention). Times are on the wall clock:
    a step can at worst let two workers do it at once, which costs only contention.
    """
    now = instant(now)
    with db._write() as c:
        return c.execute(
            "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE"
            " SET holder = excluded.holder, expires_at = excluded.expires_at"
            " WHERE leases.holder = excluded.holder OR leases.expires_at < ?"
            " OR leases.holder NOT IN (SELECT id FROM workers)",
            (name, holder, now.wall + ttl, now.wall)).rowcount == 1
