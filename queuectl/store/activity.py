"""Activity history: per queue and per minute, the jobs that started, completed, failed, went dead, were
cancelled and were recovered, and histograms of their wait and run times (docs/semantics.md, "Activity history").

Recorded where the state changes, by a trigger on the jobs table in the transaction of the change
(SQLite: a row trigger that upserts the minute's row; PostgreSQL: a statement trigger, beside the counters',
that appends one delta row per queue and minute to activity_deltas, which PostgresStore.maintain folds in:
inserts never wait for each other, where an upsert of the minute's row would make every worker's exchange
queue for its lock). A trigger sees exactly the rows a statement changed, so an exchange sent again after a
lost commit, which the OWNED guard and fragments.counted make change nothing, counts nothing twice; and every
path (an exchange, an operator's cancel, recovery, a dependency's cascade) is counted by the same rules.

Wait time is start - due (run_at), run time end - start, both in seconds, counted in the fixed buckets of
BOUNDS so that minutes from any number of workers and hosts add up exactly. Retention (purge_history) folds
the minutes it deletes into the queue's row of minute 0 (RETIRED), so that the sums over all of a queue's rows,
which `queuectl metrics` exposes as counters, never go down.

The bounds and the columns are rendered into both engines' schema steps (SQLite 11, PostgreSQL 10): a
change to them needs a new migration step. SqlStore's activity, activity_totals and purge_history are read,
totals and purge here.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from queuectl.store.base import HISTORY_BATCH
from queuectl.store.shared_schema import RECOVERED

#: Upper bounds of the wait and run time buckets, seconds (Prometheus's `le`); the last bucket is +Inf.
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
          float("inf"))
#: The counts of a minute, in order.
COUNTS = ("started", "completed", "failed", "dead", "cancelled", "recovered")
WAIT = tuple(f"wait_{i}" for i in range(len(BOUNDS)))
RUN = tuple(f"run_{i}" for i in range(len(BOUNDS)))
#: Every summed column of a row, in order: COUNTS, the wait buckets, the run buckets, wait_sum, run_sum.
SUMMED = (*COUNTS, *WAIT, *RUN, "wait_sum", "run_sum")
#: The minute of the rows that retention folded its deleted minutes into (one per queue).
RETIRED = 0


ActivityRow = NamedTuple("ActivityRow", [("queue", str), ("minute", float), *((c, int) for c in COUNTS),
                                         ("wait", tuple), ("run", tuple), ("wait_sum", float), ("run_sum", float)])
ActivityRow.__doc__ = """A queue's activity in one minute (`minute`: its start, Unix seconds), or summed over many: the
counts (COUNTS, each a field), the wait and run buckets (counts per bucket of BOUNDS, not cumulative) and the sums of
the times (seconds)."""


def added(a: ActivityRow, b: ActivityRow) -> ActivityRow:
    """Return `a` and `b` summed (counts, buckets and sums), with `a`'s queue and minute: minutes of many workers,
    hosts or queues add up exactly."""
    return a._replace(**{c: getattr(a, c) + getattr(b, c) for c in (*COUNTS, "wait_sum", "run_sum")},
                      wait=tuple(x + y for x, y in zip(a.wait, b.wait)), run=tuple(x + y for x, y in zip(a.run, b.run)))


def table(real: str, integer: str, *, primary_key: bool = True) -> str:
    """Return the column list of the activity table (`real` and `integer`: the engine's types; `primary_key`
    False for PostgreSQL's activity_deltas, which only appends)."""
    cols = ["queue text NOT NULL", f"minute {integer} NOT NULL",
            *(f"{c} {integer} NOT NULL DEFAULT 0" for c in (*COUNTS, *WAIT, *RUN)),
            f"wait_sum {real} NOT NULL DEFAULT 0", f"run_sum {real} NOT NULL DEFAULT 0"]
    if primary_key:
        cols.append("PRIMARY KEY (queue, minute)")
    return ",\n    ".join(cols)


def _sums(cols: Sequence[str] = SUMMED) -> str:
    """Each of `cols` summed, under its own name; the counts cast back to integers (PostgreSQL's sum of a bigint
    is a numeric, which psycopg converts to a Decimal one value at a time)."""
    return ", ".join(f"sum({c}) AS {c}" if c in ("wait_sum", "run_sum") else f"CAST(sum({c}) AS BIGINT) AS {c}"
                     for c in cols)


def _in_bucket(x: str, i: int) -> str:
    """1 if value `x` (seconds, SQL; NULL: no sample) falls in bucket `i` of BOUNDS (above the bound before it, at
    most its own, as Prometheus's `le`), else 0. A negative value falls in the first."""
    conds = [f"{x} > {BOUNDS[i - 1]!r}"] if i else []
    if BOUNDS[i] != float("inf"):
        conds.append(f"{x} <= {BOUNDS[i]!r}")
    return f"CASE WHEN {' AND '.join(conds)} THEN 1 ELSE 0 END"


def _ended(n: str) -> str:
    """The condition that row `n` is a job that ended: completed, failed (to be retried), dead or cancelled.
    Equalities, not an IN list: SQLite builds an IN list's lookup table again at each evaluation in a trigger."""
    return "(" + " OR ".join(f"{n}state = '{s}'" for s in ("completed", "failed", "dead", "cancelled")) + ")"


def _transitions(o: str, n: str) -> dict[str, str]:
    """The condition of each count for one job's change from row `o` to row `n` (their aliases and a dot)."""
    recovered = f"(coalesce({n}end_code, '') = '{RECOVERED}' AND coalesce({o}end_code, '') <> '{RECOVERED}')"
    moved = f"{o}state <> {n}state"
    return {
        # a start recorded (a recovery that counts an attempt for a job whose start it never saw is no start)
        "started": f"{o}started_at IS NULL AND {n}started_at IS NOT NULL AND NOT {recovered}",
        "completed": f"{n}state = 'completed' AND {moved}",
        "failed": f"{n}state = 'failed' AND {moved} AND NOT {recovered}",
        "dead": f"{n}state = 'dead' AND {moved} AND NOT {recovered}",
        "cancelled": f"{n}state = 'cancelled' AND {moved}",
        "recovered": recovered,
    }


def _changes(o: str, n: str, floor_minute: str) -> list[str]:
    """The values of one job's change from row `o` to row `n` (their aliases and a dot) in the columns queue, minute
    and SUMMED, as SQL expressions on the two rows alone (no subquery: SQLite's row trigger runs them per job);
    `floor_minute` renders the minute of a time ({}: the time)."""
    t = _transitions(o, n)
    ended = f"{o}state = 'processing' AND {_ended(n)} AND {n}started_at IS NOT NULL AND NOT {t['recovered']}"
    wait = f"CASE WHEN {t['started']} THEN {n}started_at - {n}run_at END"
    run = f"CASE WHEN {ended} THEN {n}finished_at - {n}started_at END"
    return [f"{n}queue", floor_minute.format(f"{n}updated_at"),
            *(f"CASE WHEN {cond} THEN 1 ELSE 0 END" for cond in t.values()),
            *(_in_bucket(wait, i) for i in range(len(BOUNDS))), *(_in_bucket(run, i) for i in range(len(BOUNDS))),
            *(f"CASE WHEN {x} > 0 THEN {x} ELSE 0 END" for x in (wait, run))]


#: The ON CONFLICT clause that adds a row's sums to the row of its queue and minute.
ADD_ON_CONFLICT = (" ON CONFLICT (queue, minute) DO UPDATE SET "
                   + ", ".join(f"{c} = activity.{c} + excluded.{c}" for c in SUMMED))

#: PostgreSQL's fold of activity_deltas into activity (PostgresStore.maintain), in the rows' order.
FOLD_DELTAS = (f"WITH d AS (DELETE FROM activity_deltas RETURNING *) INSERT INTO activity (queue, minute, {', '.join(SUMMED)})"
               f" SELECT queue, minute, {_sums()} FROM d GROUP BY queue, minute"
               f" ORDER BY queue, minute{ADD_ON_CONFLICT}")

#: What a change of these columns may count (SQLite's trigger names them; any other update counts nothing).
WATCHED = "state, started_at, end_code"


def sqlite_trigger() -> str:
    """Return SQLite's row trigger that adds a job's change to its minute's row (schema step 11)."""
    t = _transitions("OLD.", "NEW.")
    values = ", ".join(_changes("OLD.", "NEW.", "CAST({} / 60 AS INTEGER) * 60"))
    return (f"CREATE TRIGGER jobs_activity AFTER UPDATE OF {WATCHED} ON jobs\n"
            f"WHEN ({t['started']}) OR (OLD.state IS NOT NEW.state AND {_ended('NEW.')}) BEGIN\n"
            f"    INSERT INTO activity (queue, minute, {', '.join(SUMMED)}) VALUES ({values}){ADD_ON_CONFLICT};\nEND;\n")


def postgres_trigger() -> str:
    """Return PostgreSQL's statement trigger that appends a statement's activity, summed by queue and minute, to
    activity_deltas (schema step 10)."""
    values = ", ".join(f"{x} AS {name}" for x, name in zip(
        _changes("o.", "n.", "(floor({} / 60) * 60)::bigint"), ("queue", "minute", *SUMMED)))
    body = (f"INSERT INTO activity_deltas (queue, minute, {', '.join(SUMMED)})"
            f" SELECT queue, minute, {_sums()} FROM (SELECT {values}"
            " FROM old_rows o JOIN new_rows n ON n.seq = o.seq) s"
            " GROUP BY queue, minute HAVING " + " + ".join(f"sum({c})" for c in COUNTS) + " > 0")
    return ("CREATE FUNCTION jobs_activity() RETURNS trigger LANGUAGE plpgsql SET search_path = queuectl AS $$\n"
            f"BEGIN\n    {body};\n    RETURN NULL;\nEND $$;\n"
            "CREATE TRIGGER jobs_activity AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
            " FOR EACH STATEMENT EXECUTE FUNCTION jobs_activity();\n")


def _row(r, minute: float | None = None) -> ActivityRow:
    """An ActivityRow of a summed row `r` (its own minute, or `minute` where it has none)."""
    counts = [int(r[c] or 0) for c in COUNTS]
    return ActivityRow(r["queue"], float(r["minute"]) if minute is None else minute,
                       *counts, tuple(int(r[c] or 0) for c in WAIT), tuple(int(r[c] or 0) for c in RUN),
                       float(r["wait_sum"] or 0), float(r["run_sum"] or 0))


def _read(store, where: str, params: Sequence, group: str, minute: str = "minute") -> list:
    """The summed rows of `store`'s activity (its ACTIVITY_TABLES) matching `where`, by `group`, each row's minute
    taken as the SQL expression `minute`."""
    union = " UNION ALL ".join(f"SELECT queue, {minute} AS minute, {', '.join(SUMMED)} FROM {t} WHERE {where}"
                               for t in store.ACTIVITY_TABLES)
    with store._errors():
        return store.c.execute(f"SELECT {group}, {_sums()} FROM ({union}) a GROUP BY {group} ORDER BY {group}",
                               [*params] * len(store.ACTIVITY_TABLES)).fetchall()


def read(store, since: float, until: float, queue: str | None = None, step: int = 60) -> list[ActivityRow]:
    """Return each queue's activity per `step` seconds (a whole number of minutes; each row's `minute` the step's
    start, aligned on Unix time) for the minutes that begin in [since, until) (Unix seconds on the store's clock),
    oldest first, then by queue; steps with no activity are absent. `queue`: that queue's alone. Summed by the
    database: a week's hours are 168 rows a queue, not 10,080 minutes to add up here. (SqlStore.activity.)"""
    if step < 60 or step % 60:
        raise ValueError(f"a step of activity is a whole number of minutes, got {step!r} s")
    # The column is an integer on both engines: bounds as integers (the same minutes) keep PostgreSQL on its index
    # (a bigint compared with a float8 parameter is cast, and every row read), and the division drops the remainder.
    where, params = f"minute >= ? AND minute < ? AND minute > {RETIRED}", [math.ceil(since), math.ceil(until)]
    if queue is not None:
        where, params = f"{where} AND queue = ?", [*params, queue]
    return [_row(r) for r in _read(store, where, params, "minute, queue", f"minute / {int(step)} * {int(step)}")]


def totals(store) -> dict[str, ActivityRow]:
    """Return {queue: its activity summed since the history began}: retention does not lower it.
    (SqlStore.activity_totals.)"""
    return {r["queue"]: _row(r, RETIRED) for r in _read(store, "true", [], "queue")}


#: Seconds in the hour that rolled-up minutes sum into.
HOUR = 3600


def purge(store, before: float | None, hours_before: float | None = None, limit: int = HISTORY_BATCH) -> int:
    """Fold about `limit` rows of history (oldest first, one transaction) and return how many it deleted: those
    older than `before` (Unix seconds; None: kept forever) into their queue's totals (minute RETIRED), and then the
    minutes before the hour of `hours_before` (None: none) into their hour's row (rolled up: a step of a minute
    over them shows the hour at its first minute). Sums over any span of whole hours, and the totals, are
    unchanged by either. (SqlStore.purge_history.)"""
    deleted = 0
    with store._write() as c:
        if before is not None:
            deleted = _fold(c, str(RETIRED), "", before, limit)
        if hours_before is not None and deleted < limit:
            upto = math.floor(hours_before / HOUR) * HOUR
            hour = f"minute / {HOUR} * {HOUR}"  # integer division on both engines: the column is an integer
            deleted += _fold(c, hour, f" AND minute <> {hour}", upto, limit - deleted)
    return deleted


def _fold(c, into: str, also: str, before: float, limit: int) -> int:
    """In the open transaction `c`, add the rows of minutes below `before` that match `also` (SQL: " AND ...")
    to the row of minute `into` (SQL, of the row's minute) of their queue, at most about `limit` of them, oldest
    first, and delete them; return how many were deleted."""
    # Integer bounds (the same minutes: the column is an integer) keep PostgreSQL on its index, as in read.
    where, before = f"minute > {RETIRED} AND minute < ?{also}", math.ceil(before)
    edge = c.execute(f"SELECT minute FROM activity WHERE {where} ORDER BY minute LIMIT 1 OFFSET ?",
                     (before, max(limit - 1, 0))).fetchone()
    upto = before if edge is None else min(int(edge[0]) + 1, before)
    c.execute(f"INSERT INTO activity (queue, minute, {', '.join(SUMMED)}) SELECT queue, {into} AS m,"
              f" {_sums()} FROM activity WHERE {where} GROUP BY queue, m ORDER BY queue, m{ADD_ON_CONFLICT}", (upto,))
    return c.execute(f"DELETE FROM activity WHERE {where}", (upto,)).rowcount
