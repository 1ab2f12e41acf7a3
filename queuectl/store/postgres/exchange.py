"""PostgreSQL's exchange: the usual one (ends all successes, starts, releases, a claim) in one statement.

One round trip, its own transaction: data-modifying CTEs, each guarded by the worker's share-locked row,
so that a worker no longer registered changes nothing. Its SET lists and the claim's are the statements of
queuectl.store.exchange as queuectl.store.fragments writes them. Every other exchange is
queuectl.store.exchange's: one with a failure, output or a requeue, and every claim while a limit is in force
(the one limited claim, queuectl.store.limits.claim_within_limits, runs on both engines). Its functions take
the PostgresStore; `_claim_rows` and `_update_returning` are its engine hooks.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, Sequence

from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import JobState
from queuectl.store import fragments
from queuectl.store.base import Exchanged, WorkerGone
from queuectl.store.request import Exchange
from queuectl.store.core import JOB_COLUMNS, RELEASED, claimed_jobs
from queuectl.store import exchange as sql_exchange
from queuectl.store.core import update_each
from queuectl.store.limits import LIMITED
from queuectl.store.postgres.schema import CHANNEL
from queuectl.store.timing import placeholders, render

if TYPE_CHECKING:
    from queuectl.store.postgres.store import PostgresStore


def claim_rows(c, worker_id: int, where: str, params: list, limit: int, now: Instant) -> list:
    """The claim of up to `limit` ready jobs matching `where` in one statement (PostgresStore._claim_rows)."""
    return c.execute(f"WITH {_claim_ctes(where)} SELECT * FROM claimed",
                     (*params, limit, worker_id, now.wall)).fetchall()


def exchange(db: PostgresStore, worker_id: int, ex: Exchange, queues: Sequence[str], now: Instant | float,
             config: dict[str, Any] | None = None) -> Exchanged:
    """queuectl.store.exchange.exchange; when every ended job succeeded, none is requeued and no limit was in
    force at the last claim (the hot path), in one statement: one round trip, its own transaction
    (data-modifying CTEs, each guarded by the worker's share-locked row, so that a worker no longer
    registered changes nothing). The statement claims nothing once it finds a limit in force; the claim
    then takes queuectl.store.exchange's road, which keeps the limits, this once and while they last
    (`db._limits_seen`)."""
    if (ex.requeue or ex.output or any(not o.ok for o in ex.ended) or not (ex.writes() or ex.claim > 0)
            or (db._limits_seen and ex.claim > 0)):
        done = sql_exchange.exchange(db, worker_id, ex, queues, now, config)
        if done.limited is not None:
            db._limits_seen = done.limited
        return done
    now = instant(now)
    if not ex.writes() and not sql_exchange.any_ready(db, queues, now):
        return Exchanged([], [])  # an idle poll: a read, no row lock
    ended_ids = {o.job_id for o in ex.ended}
    # A row may change once per statement: a start recorded now wins over a release, an end over both.
    running = [r for r in ex.running if r.job_id not in ended_ids]
    release = [j for j in ex.release if j not in ended_ids and j not in {r.job_id for r in running}]
    where, params = db._ready_filter(queues, now)
    claim_ctes = _claim_ctes(f"{where} AND EXISTS (SELECT 1 FROM w) AND NOT (SELECT limited FROM lim)")
    claim_params = (*params, max(ex.claim, 0), worker_id, now.wall)
    sql = (
        f"WITH w AS (SELECT id FROM workers WHERE id = ?{db.FOR_SHARE}),"
        f" run AS (UPDATE jobs j SET {_RUNNING_SET}"
        " FROM w, json_to_recordset(?::json) AS u(id text, inc int, started_at float8, pgid int, pgid_start bigint)"
        " WHERE j.id = u.id AND j.worker_id = w.id AND j.state = 'processing' RETURNING j.seq),"
        f" ok AS (UPDATE jobs j SET {_COMPLETED_SET}"
        " FROM w, json_to_recordset(?::json) AS u(id text, inc int, started_at float8, ended_at float8,"
        " exit_code int, stdout text, stderr text, out_total bigint, err_total bigint)"
        " WHERE j.id = u.id AND j.worker_id = w.id AND j.state = 'processing'"
        " RETURNING j.id, j.seq, j.attempts, j.dependants, decode(u.stdout, 'base64') AS stdout,"
        " decode(u.stderr, 'base64') AS stderr, u.out_total, u.err_total),"
        f" outs AS ({fragments.KEEP_OUTPUT}"
        " SELECT seq, stdout, stderr, attempts, coalesce(out_total, length(stdout)),"
        " coalesce(err_total, length(stderr)) FROM ok WHERE length(stdout) > 0 OR length(stderr) > 0"
        f"{fragments.KEEP_OUTPUT_CONFLICT}),"
        " clear AS (DELETE FROM job_output WHERE seq IN (SELECT seq FROM ok WHERE attempts > 1"
        " AND length(stdout) = 0 AND length(stderr) = 0)),"
        f" rel AS (UPDATE jobs j SET {RELEASED}, updated_at = ?"
        " FROM w WHERE j.id = ANY(?::text[]) AND j.worker_id = w.id AND j.state = 'processing'"
        " AND j.started_at IS NULL),"
        f" lk AS (SELECT name FROM queues WHERE {LIMITED} AND (cardinality(?::text[]) = 0"
        " OR name = ANY(?::text[])) ORDER BY name),"
        " lim AS (SELECT count(*) > 0 AS limited, array_agg(name) AS names FROM lk),"
        f" {claim_ctes}"
        " SELECT (SELECT count(*) FROM w) AS alive, (SELECT array_agg(id) FROM ok) AS completed,"
        " (SELECT bool_or(dependants <> 0) FROM ok) AS released, (SELECT limited FROM lim) AS limited,"
        " (SELECT names FROM lim) AS limited_names, c.*"
        " FROM (SELECT 1) AS one LEFT JOIN claimed c ON true")
    ended = ex.ended
    # The batch goes as JSON (one parameter each, which psycopg sends as text, where arrays cost it
    # a dumper per element); output as base64.
    values = (
        worker_id, now.wall,
        json.dumps([{"id": r.job_id, "inc": int(r.started_at is not None), "started_at": r.started_at,
                     "pgid": r.pgid, "pgid_start": r.pgid_start} for r in running]),
        now.wall, now.wall,
        json.dumps([{"id": o.job_id, "inc": int(o.started_at is not None), "started_at": o.started_at,
                     "ended_at": now.wall if o.ended_at is None else o.ended_at, "exit_code": o.exit_code,
                     "stdout": _b64(o.stdout), "stderr": _b64(o.stderr),
                     "out_total": o.written and o.written[0], "err_total": o.written and o.written[1]}
                    for o in ended]),
        now.wall, now.wall, release, list(queues), list(queues), *claim_params)
    with db._errors():
        rows = db.c.execute(sql, values).fetchall()
    if not rows[0]["alive"]:
        raise WorkerGone(f"worker #{worker_id} is no longer registered")
    if rows[0]["released"]:
        _wake_others(db)
    completed = set(rows[0]["completed"] or ())
    states = [JobState.COMPLETED if o.job_id in completed else None for o in ended]
    if ex.claim <= 0:
        return Exchanged(states, [])
    jobs = claimed_jobs(r for r in rows if r["seq"] is not None)
    db._limits_seen = frozenset(rows[0]["limited_names"] or ())
    if db._limits_seen:  # a limit came in force: the claim keeps it, this once apart
        jobs = sql_exchange.exchange(db, worker_id, Exchange(claim=ex.claim, free=ex.free), queues, now,
                                     config).jobs
    return Exchanged(states, jobs, db._limits_seen)


def update_returning(c, sql: str, rows: list[tuple]) -> list:
    """The runs of `sql` for `rows` (queuectl.store.core.update_each) in one round trip: psycopg's executemany
    pipelines the statements (PostgresStore._update_returning)."""
    if len(rows) < 2:
        return update_each(c, sql, rows)
    out = []
    with c.conn.cursor() as cur:
        cur.executemany(c._sql(sql), rows, returning=True)
        while True:
            out.append(cur.fetchone())
            if not cur.nextset():
                break
    return out


def _wake_others(db: PostgresStore) -> None:
    """After a committed exchange whose completions released dependants (trigger jobs_dependants),
    which its own claim could not see: NOTIFY, so that the workers claim them now. Best effort: the
    poll is the fallback, and the exchange is committed already."""
    try:
        with db._errors():
            db.c.execute(f"NOTIFY {CHANNEL}")
    except DatabaseError:
        pass


def _claim_ctes(where: str) -> str:
    """The CTEs `picked` and `claimed` of a claim: `picked` takes the ready jobs matching `where` in
    claim order, `LIMIT ? FOR UPDATE SKIP LOCKED` (the CTE keeps the planner from claiming more);
    `claimed` moves them to processing for a worker (parameters after `where`'s: limit, worker id,
    now) and returns their columns. A claim counts no attempt (see SqlStore.exchange)."""
    return (f"picked AS (SELECT seq FROM jobs WHERE {where} ORDER BY {fragments.CLAIM_ORDER}"
            " LIMIT ? FOR UPDATE SKIP LOCKED),"
            f" claimed AS (UPDATE jobs j SET {_CLAIM_SET} FROM picked WHERE j.seq = picked.seq"
            f" RETURNING {_RETURNED})")


_RETURNED = ", ".join(f"j.{col.strip()}" for col in JOB_COLUMNS.split(","))


#: The claim's SET list (parameters: worker id, now).
_CLAIM_SET = placeholders(fragments.CLAIM_SET)[0]


#: The one-statement exchange's SET lists, queuectl.store.exchange's statements as fragments write them, with the
#: values of each job from its JSON record (u) and the times as parameters (now; now again, for an end
#: that a worker's clock put later).
_RUNNING_SET = render(fragments.running_set("j."), {"inc": "u.inc", "started_at": "u.started_at", "pgid": "u.pgid",
                                                     "pgid_start": "u.pgid_start", "wall": "?"})


_COMPLETED_SET = render(fragments.completed_set("j."), {
    "inc": "u.inc", "started_at": "u.started_at", "wall": "?", "ended_at": "least(u.ended_at, ?)",
    "exit_code": "u.exit_code", "error": "NULL"})


def _b64(data: bytes | None) -> str:
    return base64.b64encode(data).decode("ascii") if data else ""
