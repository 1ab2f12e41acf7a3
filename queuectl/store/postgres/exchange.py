"""PostgreSQL's exchange: the usual one (ends all successes, starts, releases, a claim) in one statement.

One round trip, its own transaction: data-modifying CTEs, each guarded by the worker's share-locked row,
so that a worker no longer registered changes nothing. Its SET lists and the claim's are the statements of
SqlStore as queuectl.store.fragments writes them; a claim while a limit is in force calls claim_limited
(queuectl.store.postgres.schema), the same rules again. Every other exchange is SqlStore's.
"""

from __future__ import annotations

import base64
import json

from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import JobState
from queuectl.store import fragments
from queuectl.store.base import Exchanged, WorkerGone
from queuectl.store.request import Exchange
from queuectl.store.core import JOB_COLUMNS, RELEASED, claimed_jobs
from queuectl.store.limits import LIMITED, RATE_SLACK
from queuectl.store.postgres.schema import CHANNEL, SCHEMA
from queuectl.store.sql import SqlStore
from queuectl.store.timing import placeholders, render


class OneStatementExchange(SqlStore):
    """SqlStore with PostgreSQL's claims: one statement each, and the usual exchange in one statement."""

    #: The limited queues the last claim saw: whether the one-statement exchange claims by claim_limited.
    _limits_seen: frozenset[str] = frozenset()

    def _claim_rows(self, c, worker_id: int, where: str, params: list, limit: int, now: Instant) -> list:
        return c.execute(f"WITH {_claim_ctes(where)} SELECT * FROM claimed",
                         (*params, limit, worker_id, now.wall)).fetchall()

    def exchange(self, worker_id, ex, queues, now, config=None):
        """SqlStore.exchange; when every ended job succeeded and none is requeued (the hot path), in one
        statement: one round trip, its own transaction (data-modifying CTEs, each guarded by the
        worker's share-locked row, so that a worker no longer registered changes nothing)."""
        if ex.requeue or ex.output or any(not o.ok for o in ex.ended) or not (ex.writes() or ex.claim > 0):
            done = super().exchange(worker_id, ex, queues, now, config)
            if done.limited is not None:
                self._limits_seen = done.limited
            return done
        now = instant(now)
        if not ex.writes() and not self._any_ready(queues, now):
            return Exchanged([], [])  # an idle poll: a read, no row lock
        ended_ids = {o.job_id for o in ex.ended}
        # A row may change once per statement: a start recorded now wins over a release, an end over both.
        running = [r for r in ex.running if r.job_id not in ended_ids]
        release = [j for j in ex.release if j not in ended_ids and j not in {r.job_id for r in running}]
        where, params = self._ready_filter(queues, now)
        limited = bool(self._limits_seen) and ex.claim > 0  # a limit was in force at the last claim
        if limited:  # the claim keeps the limits
            claim_ctes = f"claimed AS (SELECT {_RETURNED} FROM {_CLAIM_LIMITED} j WHERE EXISTS (SELECT 1 FROM w))"
            claim_params = _claim_limited_params(worker_id, queues, ex.claim, ex.free, now, [*ended_ids, *release])
        else:
            claim_ctes = _claim_ctes(f"{where} AND EXISTS (SELECT 1 FROM w) AND NOT (SELECT limited FROM lim)")
            claim_params = (*params, max(ex.claim, 0), worker_id, now.wall)
        sql = (
            f"WITH w AS (SELECT id FROM workers WHERE id = ?{self.FOR_SHARE}),"
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
        with self._errors():
            rows = self.c.execute(sql, values).fetchall()
        if not rows[0]["alive"]:
            raise WorkerGone(f"worker #{worker_id} is no longer registered")
        if rows[0]["released"]:
            self._wake_others()
        completed = set(rows[0]["completed"] or ())
        states = [JobState.COMPLETED if o.job_id in completed else None for o in ended]
        if ex.claim <= 0:
            return Exchanged(states, [])
        jobs = claimed_jobs(r for r in rows if r["seq"] is not None)
        if rows[0]["limited"] and not limited:  # a limit came in force: claim so, this once apart
            jobs = super().exchange(worker_id, Exchange(claim=ex.claim, free=ex.free), queues, now, config).jobs
        self._limits_seen = frozenset(rows[0]["limited_names"] or ())
        return Exchanged(states, jobs, self._limits_seen)

    def _claim_within_limits(self, c, worker_id, queues, limit, free, limits, now):
        """LimitStore._claim_within_limits by claim_limited (postgres_schema.claim_limited), the function the
        one-statement exchange calls too: one statement, its rules written once for this engine."""
        return c.execute(f"SELECT {_RETURNED} FROM {_CLAIM_LIMITED} j",
                         _claim_limited_params(worker_id, queues, limit, free, now, [])).fetchall()

    def _update_returning(self, c, sql: str, rows: list[tuple]) -> list:
        """SqlStore._update_returning in one round trip: psycopg's executemany pipelines the statements."""
        if len(rows) < 2:
            return super()._update_returning(c, sql, rows)
        out = []
        with c.conn.cursor() as cur:
            cur.executemany(c._sql(sql), rows, returning=True)
            while True:
                out.append(cur.fetchone())
                if not cur.nextset():
                    break
        return out

    def _wake_others(self) -> None:
        """After a committed exchange whose completions released dependants (trigger jobs_dependants),
        which its own claim could not see: NOTIFY, so that the workers claim them now. Best effort: the
        poll is the fallback, and the exchange is committed already."""
        try:
            with self._errors():
                self.c.execute(f"NOTIFY {CHANNEL}")
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


#: The one-statement exchange's SET lists, the statements of SqlStore's as fragments write them, with the
#: values of each job from its JSON record (u) and the times as parameters (now; now again, for an end
#: that a worker's clock put later).
_RUNNING_SET = render(fragments.running_set("j."), {"inc": "u.inc", "started_at": "u.started_at", "pgid": "u.pgid",
                                                     "pgid_start": "u.pgid_start", "wall": "?"})


_COMPLETED_SET = render(fragments.completed_set("j."), {
    "inc": "u.inc", "started_at": "u.started_at", "wall": "?", "ended_at": "least(u.ended_at, ?)",
    "exit_code": "u.exit_code", "error": "NULL"})


#: A call of claim_limited (postgres_schema.claim_limited); its parameters: _claim_limited_params.
_CLAIM_LIMITED = (f"{SCHEMA}.claim_limited(?::bigint, ?::text[], ?::integer, ?::integer, ?::float8, ?::text, ?::float8,"
                  " ?::float8, ?::text[])")


def _claim_limited_params(worker_id: int, queues, claim: int, free: int | None, now: Instant, leaving: list) -> tuple:
    """The parameters of _CLAIM_LIMITED: a claim of up to `claim` jobs for `worker_id` from `queues`, `free` of them
    for free slots (None: all), at `now`; `leaving`: the worker's jobs that the same statement ends or gives back."""
    return (worker_id, list(queues), claim, claim if free is None else free, now.wall, now.domain, now.mono,
            RATE_SLACK, leaving)


def _b64(data: bytes | None) -> str:
    return base64.b64encode(data).decode("ascii") if data else ""
