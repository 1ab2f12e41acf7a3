"""A worker's exchange with the store: starts, output, ends, requeues and releases recorded, and a claim, in one
transaction (see exchange).

Claims of limited queues keep the limits (queuectl.store.limits); the statements' SET lists and the ready
filter are queuectl.store.fragments'. PostgreSQL does the usual exchange in one statement of the same
fragments (queuectl.store.postgres)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from queuectl.domain.clock import Instant, instant
from queuectl.domain.models import Job, JobState
from queuectl.store import fragments
from queuectl.store.base import Exchanged, WorkerGone, after_failure
from queuectl.store.core import (DUE, OUTPUT_BEFORE, OWNED, RELEASED, RESCHEDULE, SqlCore, claimed_jobs,
                                 due_params, queue_filter)
from queuectl.store.limits import claim_within_limits, limits_for_claim
from queuectl.store.settings import read_settings
from queuectl.store.timing import placeholders

if TYPE_CHECKING:
    from queuectl.store.request import Exchange, LiveOutput, Outcome

#: A running job's start and process group recorded (parameters: fragments.running_set's, job id, worker id).
_RUNNING = placeholders(f"UPDATE jobs SET {fragments.running_set()} {OWNED}")[0]

#: A job of the calling worker completed (parameters: fragments.completed_set's, job id, worker id).
_COMPLETED = placeholders(f"UPDATE jobs SET {fragments.completed_set()} {OWNED} RETURNING seq, attempts, dependants")[0]

#: A job failed: retried, dead or cancelled (parameters: state, attempts, started_at, RESCHEDULE's,
#: fragments.ENDED_SET's, seq).
_FAILED = placeholders(f"UPDATE jobs SET state = ?, attempts = ?, started_at = coalesce(?, started_at), {RESCHEDULE},"
                       f" {fragments.ENDED_SET} WHERE seq = ?")[0]


def exchange(db: SqlCore, worker_id: int, ex: Exchange, queues: Sequence[str], now: Instant | float,
             config: dict[str, Any] | None = None) -> Exchanged:
    """Record what `ex` says and claim up to `ex.claim` ready jobs, in one transaction (a worker's
    exchange with the store; see Exchange for what is recorded, in which order).

    Ready: pending or failed and due (see DUE), in `queues` (empty: every queue), of a
    queue not paused. Claim order: priority (higher first), then run_at, then enqueue order.
    A claimed job is processing for `worker_id` but counts no attempt until its start is
    recorded (Running.started_at, or Outcome.started_at for a job that also ended). Claims
    are atomic (see each engine's _claim_rows): two workers never claim the same job.

    An ended job's success completes it; a failure schedules a retry (state failed, run_at =
    now + backoff) while attempts <= max_retries, else moves it to dead (the DLQ); a job
    whose cancel was requested is cancelled. A job this worker no longer owns is left alone.
    `config` (the settings in force, as the worker last read them) spares a read of the
    config table. Returns Exchanged (the ended jobs' new states, None for a job not owned; the
    claimed jobs; the limited queues the claim saw; the seconds until each failed job's retry).
    Raises WorkerGone, changing nothing, if the worker is no longer registered.
    """
    now = instant(now)
    if not ex.writes() and (ex.claim <= 0 or not any_ready(db, queues, now)):
        return Exchanged([], [])  # an idle poll: a read, no write lock
    with db._write() as c:
        # The share lock makes a recovery of this worker wait for the commit, and then see the claims.
        if not c.execute(f"SELECT 1 FROM workers WHERE id = ?{db.FOR_SHARE}", (worker_id,)).fetchone():
            # Recovered while it waited for the lock: jobs claimed now would belong to nobody.
            raise WorkerGone(f"worker #{worker_id} is no longer registered")
        config = config or read_settings(c, db.defaults)
        if ex.running:
            c.executemany(
                _RUNNING,
                [(int(r.started_at is not None), r.started_at, r.pgid, r.pgid_start, now.wall, r.job_id, worker_id)
                 for r in ex.running])
        if ex.output:
            _record_output(db, c, worker_id, ex.output, config["output-limit"])
        states, retry_in = _finish(db, c, worker_id, ex.ended, now, config)
        _requeue(c, worker_id, ex.requeue, now)
        _release(c, worker_id, ex.release, now)
        if ex.claim <= 0:
            return Exchanged(states, [], None, retry_in)
        return Exchanged(states, *_claim(db, c, worker_id, queues, ex.claim, now, ex.free), retry_in)


def _claim(db: SqlCore, c, worker_id: int, queues: Sequence[str], limit: int, now: Instant,
           free: int | None = None) -> tuple[list[Job], frozenset[str]]:
    """Claim up to `limit` jobs; of limited queues (queuectl.store.limits) no more than `free` (None: `limit`).
    Return (the claimed jobs, the limited queues among `queues`)."""
    limited = limits_for_claim(c, queues, db.FOR_UPDATE)
    if limited:
        rows = claim_within_limits(db, c, worker_id, queues, limit, limit if free is None else free, limited, now)
        return claimed_jobs(rows), frozenset(r["name"] for r in limited)
    where, params = db._ready_filter(queues, now)
    return claimed_jobs(db._claim_rows(c, worker_id, where, params, limit, now)), frozenset()


def any_ready(db: SqlCore, queues: Sequence[str], now: Instant) -> bool:
    return db._exists_ready(*db._ready_filter(queues, now))


def has_work(db: SqlCore, queues: Sequence[str], now: Instant | float) -> bool:
    """Return True if a job in `queues` is ready now or is waiting for a retry (state failed).

    Jobs of paused queues do not count.
    """
    return db._exists_ready(*queue_filter(
        f"{fragments.READY_STATES} AND ({DUE} OR state = 'failed') AND {fragments.not_paused()}",
        due_params(instant(now)), queues))


def _finish(db: SqlCore, c, worker_id: int, outcomes: Sequence[Outcome], now: Instant,
            config) -> tuple[list[JobState | None], dict[str, float] | None]:
    """Record the ended jobs: successes in one batch of statements, failures one by one. Return their
    states (Exchanged.states) and the seconds until each failed one's retry (Exchanged.retry_in)."""
    states: dict[int, JobState | None] = {}
    retry_in: dict[str, float] = {}
    done = [(i, o) for i, o in enumerate(outcomes) if o.ok]
    rows = db._update_returning(
        c, _COMPLETED,
        [(int(o.started_at is not None), o.started_at, *_ended(o, now), o.job_id, worker_id) for _, o in done])
    for (i, o), row in zip(done, rows):
        states[i] = None if row is None else JobState.COMPLETED
        if row is not None:
            _keep_output(c, row, o)
    if any(row is not None and row["dependants"] for row in rows):
        db._notify(c)  # its trigger may have released dependants: wake the workers to claim them
    for i, o in enumerate(outcomes):
        if not o.ok:
            states[i], delay = _fail_one(db, c, worker_id, o, now, config)
            if states[i] == JobState.FAILED:
                retry_in[o.job_id] = delay
    return [states[i] for i in range(len(outcomes))], retry_in or None


def _ended(o: Outcome, now: Instant) -> tuple:
    """The values of fragments.ENDED_SET for outcome `o` (wall, ended_at, exit_code, error)."""
    ended_at = now.wall if o.ended_at is None else min(o.ended_at, now.wall)
    return now.wall, ended_at, o.exit_code, o.error


def _fail_one(db: SqlCore, c, worker_id: int, o: Outcome, now: Instant,
              config) -> tuple[JobState | None, float | None]:
    """Record a failed attempt; return the job's new state (None: not this worker's) and the seconds until
    its retry (None unless failed)."""
    row = c.execute(f"SELECT seq, attempts, max_retries, cancel_requested_at, started_at FROM jobs {OWNED}",
                    (o.job_id, worker_id)).fetchone()
    if row is None:
        return None, None
    attempts = row["attempts"] + int(o.started_at is not None and row["started_at"] is None)
    state, schedule = after_failure(attempts, row["max_retries"], now, config, row["cancel_requested_at"])
    c.execute(_FAILED,
              (state.value, attempts, o.started_at, *schedule, *_ended(o, now), row["seq"]))
    _keep_output(c, {"seq": row["seq"], "attempts": attempts}, o)
    return state, schedule[1]


def _keep_output(c, row, o: Outcome) -> None:
    """Store the run's output; or delete an earlier attempt's, which must not pass for this one's."""
    if o.stdout or o.stderr:
        written = o.written or (len(o.stdout), len(o.stderr))
        c.execute(f"{fragments.KEEP_OUTPUT} VALUES (?, ?, ?, ?, ?, ?){fragments.KEEP_OUTPUT_CONFLICT}",
                  (row["seq"], o.stdout, o.stderr, row["attempts"], *written))
    elif row["attempts"] > 1:
        c.execute("DELETE FROM job_output WHERE seq = ?", (row["seq"],))


def _record_output(db: SqlCore, c, worker_id: int, output: Sequence[LiveOutput], limit: int) -> None:
    """Append what running jobs of this worker wrote to their stored output, keeping the last `limit`
    bytes of each stream. The bytes a record holds that the store has already (a record sent again
    after its reply was lost) are skipped; output of an earlier attempt is replaced."""
    def stream(name: str) -> str:
        new = f"substr(excluded.{name}, CAST(job_output.{name}_total - ? + 1 AS INTEGER))"
        # SQLite's substr of an empty blob is NULL: coalesce
        joined = db.CONCAT.format(f"job_output.{name}", f"coalesce({new}, excluded.{name})")
        return (f"{name} = CASE WHEN job_output.attempt = excluded.attempt AND job_output.{name}_total >= ?"
                f" THEN coalesce(substr({joined}, CASE WHEN length({joined}) > {int(limit)}"
                f" THEN length({joined}) - {int(limit)} + 1 ELSE 1 END), {joined}) ELSE excluded.{name} END")

    out, err = stream("stdout"), stream("stderr")  # every ? in each is that stream's `from`
    c.executemany(
        f"{fragments.KEEP_OUTPUT} SELECT seq, ?, ?, attempts, ?, ? FROM jobs {OWNED} ON CONFLICT (seq) DO UPDATE SET"
        f" {out}, {err}, attempt = excluded.attempt,"
        " stdout_total = excluded.stdout_total, stderr_total = excluded.stderr_total",
        [(o.stdout, o.stderr, *o.written, o.job_id, worker_id, *[o.stdout_from] * out.count("?"),
          *[o.stderr_from] * err.count("?")) for o in output])


def _requeue(c, worker_id: int, job_ids: Sequence[str], now: Instant) -> None:
    """Put running jobs (stopped by a forced stop) back to pending, their attempt given back (cancelled, with
    the error 'cancelled', if a cancel was requested).

    They keep the due time they were claimed by, so they are ready again at once (unless
    an absolute run_at lies ahead of a wall clock stepped back since).
    """
    if job_ids:
        c.executemany(f"{OUTPUT_BEFORE} (SELECT seq FROM jobs {OWNED})",
                      [(job_id, worker_id) for job_id in job_ids])
        c.executemany(
            f"UPDATE jobs SET {RELEASED}, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
            f" end_code = NULL, updated_at = ? {OWNED}",
            [(now.wall, now.wall, job_id, worker_id) for job_id in job_ids])


def _release(c, worker_id: int, job_ids: Sequence[str], now: Instant) -> None:
    """Give back claimed jobs that never started: pending again (cancelled if a cancel was requested),
    no attempt counted, no run counted."""
    if job_ids:
        c.executemany(
            f"UPDATE jobs SET {RELEASED}, updated_at = ? {OWNED} AND started_at IS NULL",
            [(now.wall, now.wall, job_id, worker_id) for job_id in job_ids])
