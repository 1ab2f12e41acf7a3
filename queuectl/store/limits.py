"""Queue limits in the store: set, list, and the one claim that keeps them, on both engines.

A limit lives in the queue's row of `queues`, beside its pause. Claims keep it inside the
claim transaction: the limited queues' rows are read FOR UPDATE (PostgreSQL; SQLite's write
transaction excludes every other writer already), so two claims of one limited queue run one
after the other, and the second counts what the first claimed. Then:

- concurrency N: the queue's processing jobs (claimed ones not yet started included) number
  at most N. A job recovered from a dead worker, given back or ended frees its place.
- rate COUNT/WINDOW: the queue's claims in the last WINDOW seconds (kept in queue_starts) number at
  most COUNT. A job starts within milliseconds of its claim; so that the starts themselves also keep
  the limit, the window is taken RATE_SLACK seconds longer. The window is measured on the clock of
  queuectl.store.timing, which no wall-clock step moves: a claim's age is read on the monotonic clock
  of the boot that made it when the reader shares that boot (every worker of a SQLite database on
  one host), else on the store's wall clock (on PostgreSQL the server's). A forward step so frees no
  place early; a claim that a step back put in the future counts one whole window from when a
  claim finds it (timing.REBASE), so that a step back holds the queue at most one window.
- Claiming ahead: a worker busy with short jobs claims jobs ahead of its free slots (its
  reserve, queuectl.worker); a job so claimed holds a place before it runs. Of a limited
  queue, a claim takes for the free slots what the limit allows, and ahead of them at most half
  of the room left beyond that, so that the other workers always find room too (timing.ahead). (A job waits
  in a reserve milliseconds, not longer: a reserve behind slots busy with longer jobs is given
  back at once.)
- The other queues are claimed as ever: a full limited queue never holds them back.
"""

from __future__ import annotations

from typing import Sequence

from queuectl.domain.clock import Instant, instant
from queuectl.domain.models import QueueLimit
from queuectl.store import fragments, timing
from queuectl.store.core import JOB_COLUMNS, SqlCore
from queuectl.domain.errors import InvalidInput

#: Seconds added to a rate limit's window (see the module).
RATE_SLACK = 0.5
#: A limited queue: the WHERE of queues rows that hold a limit.
LIMITED = "(concurrency IS NOT NULL OR rate_count IS NOT NULL)"
#: The count of a queue's processing jobs (parameter: the queue).
_PROCESSING = "SELECT count(*) FROM jobs WHERE queue = ? AND state = 'processing'"
#: The largest concurrency and rate count (PostgreSQL's integer), and the longest rate window (seconds: a
#: year and a day, as the longest --every).
MAX_COUNT = 2**31 - 1
MAX_WINDOW = 366 * 86400
#: A limited queue's room before its limits bound it (no limit is larger).
NO_LIMIT = MAX_COUNT
#: How many jobs of a limited queue a claim may take (slots: room, free, claim; see fragments.allowed).
_ALLOWED = f"SELECT {fragments.allowed('{room}', '{free}', '{claim}')}"
#: A claim of the chosen jobs (parameters: worker id, now, then the seqs).
_CLAIM = timing.placeholders(f"UPDATE jobs SET {fragments.CLAIM_SET} WHERE seq IN")[0]
#: Unchanged: what set_limit takes as "not given".
UNCHANGED = object()


def set_limit(db: SqlCore, queue: str, now: Instant | float, concurrency=UNCHANGED, rate=UNCHANGED) -> QueueLimit:
    """Set or clear the limits of `queue`; return them as they are now.

    `concurrency`: an int from 1 to MAX_COUNT, or None to clear it; `rate`: (count from 1 to
    MAX_COUNT, window seconds > 0 and <= MAX_WINDOW), or None to clear it; UNCHANGED leaves
    either as it is. Workers are woken (a limit raised or cleared lets them claim more).
    Raises InvalidInput for values out of range.
    """
    check_limits(concurrency, rate)
    now = instant(now)
    with db._write() as c:
        row = c.execute(f"SELECT concurrency, rate_count, rate_window FROM queues WHERE name = ?{db.FOR_UPDATE}",
                        (queue,)).fetchone()
        old = (row["concurrency"], row["rate_count"], row["rate_window"]) if row else (None, None, None)
        new_c = old[0] if concurrency is UNCHANGED else concurrency
        new_r = old[1:] if rate is UNCHANGED else (rate or (None, None))
        c.execute("INSERT INTO queues (name, paused_at, concurrency, rate_count, rate_window)"
                  " VALUES (?, NULL, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency,"
                  " rate_count = excluded.rate_count, rate_window = excluded.rate_window",
                  (queue, new_c, *new_r))
        c.execute(f"DELETE FROM queues WHERE name = ? AND paused_at IS NULL AND NOT {LIMITED}", (queue,))
        if new_r[0] is None:
            c.execute("DELETE FROM queue_starts WHERE queue = ?", (queue,))
        db._notify(c)
        processing = c.execute(_PROCESSING, (queue,)).fetchone()[0]
    return QueueLimit(queue, new_c, new_r[0], new_r[1], processing)


def queue_limits(db: SqlCore) -> list[QueueLimit]:
    """Every queue's limits, by queue name, with how many of its jobs are processing now."""
    with db._errors():
        return [QueueLimit(r["name"], r["concurrency"], r["rate_count"], r["rate_window"], r["processing"])
                for r in db.c.execute(
                    "SELECT name, concurrency, rate_count, rate_window, (SELECT count(*) FROM jobs j"
                    f" WHERE j.queue = q.name AND j.state = 'processing') AS processing FROM queues q"
                    f" WHERE {LIMITED} ORDER BY name")]


def rate_room_at(db: SqlCore, queues: Sequence[str], now: Instant | float) -> float | None:
    """The earliest time (Unix seconds, on the store's clock) at which a queue of `queues` (empty: every
    queue) that its rate limit holds back (its window full, not paused, a job of it due) gets a place
    back: its oldest claim in the window plus the window and RATE_SLACK, ages on the clock of the module.
    None if no queue is so held back. One read; a worker whose claim came short waits for this rather
    than its whole poll."""
    now = instant(now)
    names = f" AND q.name IN ({', '.join('?' * len(queues))})" if queues else ""
    age = timing.start_age("s.")
    sql, params = timing.bind(
        f"SELECT min(x.free_in) FROM (SELECT q.name, q.rate_window + {{slack}} - max({age}) AS free_in"
        f" FROM queues q JOIN queue_starts s ON s.queue = q.name WHERE q.rate_count IS NOT NULL"
        f" AND q.paused_at IS NULL AND {age} < q.rate_window + {{slack}}{names}"
        " GROUP BY q.name, q.rate_count, q.rate_window HAVING count(*) >= q.rate_count) x"
        f" WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.queue = x.name AND j.{fragments.READY_STATES} AND {timing.due('j.')})",
        {**timing.clock_values(now), "slack": RATE_SLACK}, *queues)
    with db._errors():
        free_in = db.c.execute(sql, params).fetchone()[0]
    return None if free_in is None else now.wall + free_in


def _pick_per_queue(db: SqlCore, c, queues: Sequence[str], allowed: dict[str, int], limit: int, now: Instant) -> list:
    """The first ready jobs (seq, priority, run_at, queue) of each queue of `queues` (empty: every queue) in
    claim order, as many as `allowed` says for a limited queue and `limit` for the others, each queue
    read by its own seek of the jobs_ready_queue index (a queue's backlog costs the others nothing). Each job
    picked is locked (the engine's SKIP_LOCKED: on PostgreSQL a job another claim holds is passed over, never
    claimed twice; SQLite's write transaction excludes every other claim already)."""
    where, params = db._ready_filter((), now)
    picked = []
    for name in ready_queues(c, queues, db.READY_QUEUE_INDEX):
        n = min(allowed.get(name, limit), limit)
        if n > 0:
            picked += c.execute(f"SELECT seq, priority, run_at, queue FROM jobs {db.READY_QUEUE_INDEX} WHERE queue = ?"
                                f" AND {where} ORDER BY {fragments.CLAIM_ORDER} LIMIT ?{db.SKIP_LOCKED}",
                                (name, *params, n))
    return picked


def claim_within_limits(db: SqlCore, c, worker_id: int, queues: Sequence[str], limit: int, free: int, limits: list,
                         now: Instant) -> list:
    """Claim up to `limit` ready jobs (`free` of them for free slots), of the limited queues (`limits`, from
    limits_for_claim, their rows locked) no more than timing.ahead lets each (evaluated by the database);
    return the claimed rows (claim order is the caller's to restore). The one limited claim, both engines'
    (see the module): each statement after the lock sees every claim committed before it (SQLite's write
    transaction; PostgreSQL's READ COMMITTED takes a snapshot per statement)."""
    allowed: dict[str, int] = {}
    clock = timing.clock_values(now)
    for r in limits:
        room = NO_LIMIT
        if r["concurrency"] is not None:
            room = min(room, r["concurrency"] - c.execute(_PROCESSING, (r["name"],)).fetchone()[0])
        if r["rate_count"] is not None:
            values = {**clock, "queue": r["name"], "window": r["rate_window"], "slack": RATE_SLACK}
            c.execute(*timing.bind(timing.REBASE, values))
            for statement in timing.EXPIRE:
                c.execute(*timing.bind(statement, values))
            room = min(room, r["rate_count"] - c.execute("SELECT count(*) FROM queue_starts WHERE queue = ?",
                                                         (r["name"],)).fetchone()[0])
        allowed[r["name"]] = c.execute(*timing.bind(_ALLOWED, {"room": room, "free": free, "claim": limit})
                                       ).fetchone()[0]
    picked = _pick_per_queue(db, c, queues, allowed, limit, now)
    picked = sorted(picked, key=lambda r: fragments.claim_key(r["priority"], r["run_at"], r["seq"]))[:limit]
    if not picked:
        return []
    rows = c.execute(
        f"{_CLAIM} ({', '.join('?' * len(picked))}) RETURNING {JOB_COLUMNS}",
        (worker_id, now.wall, *(r["seq"] for r in picked))).fetchall()
    rated = {r["name"] for r in limits if r["rate_count"] is not None}
    starts = [{**clock, "queue": r["queue"]} for r in picked if r["queue"] in rated]
    if starts:
        sql, order = timing.placeholders(timing.RECORD)
        c.executemany(sql, [[start[slot] for slot in order] for start in starts])
    return rows


def limits_for_claim(c, queues: Sequence[str], for_update: str) -> list:
    """Return the limited queues' rows (name, concurrency, rate_count, rate_window) that a claim from `queues` (empty:
    every queue) may take from, locked by `for_update` (the engine's FOR UPDATE clause), by name."""
    where = LIMITED + (f" AND name IN ({', '.join('?' * len(queues))})" if queues else "")
    return c.execute(f"SELECT name, concurrency, rate_count, rate_window FROM queues WHERE {where}"
                     f" ORDER BY name{for_update}", list(queues)).fetchall()


def check_limits(concurrency=UNCHANGED, rate=UNCHANGED) -> None:
    """Raise InvalidInput unless `concurrency` and `rate` are as set_limit takes them (None and UNCHANGED pass)."""
    if concurrency not in (UNCHANGED, None) and not 1 <= concurrency <= MAX_COUNT:
        raise InvalidInput(f"--concurrency must be from 1 to {MAX_COUNT}, got {concurrency}")
    if rate not in (UNCHANGED, None) and (not 1 <= rate[0] <= MAX_COUNT or not 0 < rate[1] <= MAX_WINDOW):
        raise InvalidInput(f"--rate takes COUNT/DURATION with COUNT from 1 to {MAX_COUNT} and a window longer than"
                           " 0s and at most 366d, such as 30/1m or 5/2s")


def ready_queues(c, queues: Sequence[str], hint: str = "") -> list[str]:
    """The queues of `queues` (empty: every queue) that have pending or failed jobs, by name: a loose scan of the
    jobs_ready_queue index (one seek per queue), not a read of the jobs."""
    if queues:
        return list(queues)
    found, name = [], ""
    while True:
        name = c.execute(f"SELECT min(queue) FROM jobs {hint} WHERE {fragments.READY_STATES} AND queue > ?",
                         (name,)).fetchone()[0]
        if name is None:
            return found
        found.append(name)
