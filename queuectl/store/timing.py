"""The time rules that SQL evaluates, each written once: due times, rate windows, claiming ahead.

Each rule is a SQL fragment (portable between SQLite and PostgreSQL) with named slots for the
reader's clock, a queuectl.domain.clock.Instant: `{domain}` (its boot id), `{mono}` (CLOCK_MONOTONIC
seconds of that boot) and `{wall}` (the store's wall clock, Unix seconds: this host's on SQLite,
the server's on PostgreSQL), and for the values a rule takes (`{slack}`, `{room}`, `{free}`, ...).
Every fragment is rendered in one of two ways:

- `bind(sql, values)`: each slot becomes a `?` placeholder and its value a parameter, in order:
  the statements of the concern modules, on both engines;
- `render(sql, names)`: each slot becomes an SQL expression: the SET lists of PostgreSQL's
  one-statement exchange, whose values come from a JSON record per job.

The clock. A time recorded with the boot id and monotonic reading of its writer (a job's due
time: due_boot, due_mono; a rate-limited claim: queue_starts.boot, mono) is compared on that
monotonic clock by a reader of the same boot, which no wall-clock step moves. A reader of another
boot (another host, or a time recorded before a reboot) compares the wall-clock column instead:
on PostgreSQL the server's clock, which every host reads alike; on SQLite the host's (the hosts or
containers sharing one file are assumed to agree). A wall-clock time that a reader finds ahead of
its clock by more than clock.STEP_TOLERANCE shows a clock stepped back since it was recorded.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping

from queuectl.domain.clock import STEP_TOLERANCE, Instant

#: The slots of the reader's clock and the Instant field each is bound to.
CLOCK_SLOTS = {"domain": "domain", "mono": "mono", "wall": "wall"}

_SLOT = re.compile(r"\{([a-z_]+)\}")


def due(col: str = "") -> str:
    """The condition that a pending or failed job is due (`col`: the jobs table's alias and a dot, or "").

    On the monotonic clock when the reader shares the boot that scheduled it (due_boot); otherwise
    on run_at, the wall clock. A retry, or a job due at once when it was scheduled (delay 0), is
    also due when the reader's wall clock reads more than STEP_TOLERANCE seconds earlier than when
    it was scheduled (stepped back, or behind the scheduler's): it then runs no later than its
    backoff after the failure. A longer delay given at enqueue is kept on the wall clock by such a
    reader, and an absolute run_at (delay NULL) stays absolute. Slots: domain, mono, wall.
    """
    return (f"(CASE WHEN {col}due_boot = {{domain}} THEN {col}due_mono <= {{mono}} ELSE {col}run_at <= {{wall}}"
            f" OR (({col}delay = 0 OR {col}state = 'failed') AND {col}run_at - {col}delay > {{wall}} + {STEP_TOLERANCE})"
            " END)")


def _same_boot(col: str) -> str:
    """The condition that a queue_starts row (`col`: its alias and a dot, or "") was recorded in the reader's boot."""
    return f"{col}boot = {{domain}}"


def start_age(col: str = "") -> str:
    """Seconds from a rate-limited claim (a queue_starts row; `col`: its alias and a dot, or "") to the reader's now.

    On the monotonic clock of the claim's boot when the reader shares it; else on the wall clock,
    where it is negative for a claim recorded before the clock was stepped back (see REBASE).
    Slots: domain, mono, wall.
    """
    return f"(CASE WHEN {_same_boot(col)} THEN {{mono}} - {col}mono ELSE {{wall}} - {col}at END)"


#: The claims of queue {queue} that a wall clock stepped back (by more than STEP_TOLERANCE) put in the
#: future are recorded again as made now, on the reader's clocks: they count one whole window from
#: now (no burst), and a step back holds the queue no longer than that window, not for the length of
#: the step. A claim of the reader's boot never needs it. (`at > {wall} + ...` only lets the index on
#: (queue, at) find the few rows that can be so.) Slots: wall, domain, mono, queue.
REBASE = (f"UPDATE queue_starts SET at = {{wall}}, boot = {{domain}}, mono = {{mono}} WHERE queue = {{queue}}"
          f" AND at > {{wall}} + {STEP_TOLERANCE} AND {start_age()} < -{STEP_TOLERANCE}")
#: Forget the claims of queue {queue} whose start_age is {window} (seconds) and {slack} or more: they no longer
#: count. Two statements, the age solved for the column of each clock, so that each finds its rows by an
#: index (queue, boot, mono; queue, at) rather than reading every claim of the queue's window. Slots: queue,
#: domain, mono, wall, window, slack.
EXPIRE = (f"DELETE FROM queue_starts WHERE queue = {{queue}} AND {_same_boot('')}"
          " AND mono <= {mono} - {window} - {slack}",
          "DELETE FROM queue_starts WHERE queue = {queue} AND at <= {wall} - {window} - {slack}"
          f" AND NOT coalesce({_same_boot('')}, 1 = 0)")
#: Records a claim of {queue} made now, on the reader's clocks (an INSERT ... SELECT).
RECORD = "INSERT INTO queue_starts (queue, at, boot, mono) SELECT {queue}, {wall}, {domain}, {mono}"


def ahead(room: str, free: str) -> str:
    """How many jobs a claim for `free` free slots may take of a limited queue with `room` places left (SQL
    expressions, `room` >= 0): the free slots' share, and ahead of them at most half of the room beyond, so
    that the other workers always find room too (queuectl.store.limits). Integer division: both are integers.
    """
    return f"(CASE WHEN {room} <= {free} THEN {room} ELSE {free} + ({room} - {free}) / 2 END)"


def clock_values(now: Instant) -> dict[str, Any]:
    """The values of the clock slots at `now`."""
    return {slot: getattr(now, field) for slot, field in CLOCK_SLOTS.items()}


def bind(sql: str, values: Mapping[str, Any], *args: Any) -> tuple[str, list]:
    """Return `sql` with each `{slot}` turned into `?`, and the parameters in the order of the text.

    A `?` already in `sql` takes the next of `args`. Raises KeyError for a slot not in `values`.
    """
    text, order = placeholders(sql)
    rest = iter(args)
    return text, [next(rest) if slot is None else values[slot] for slot in order]


@functools.lru_cache(maxsize=64)
def placeholders(sql: str) -> tuple[str, tuple[str | None, ...]]:
    """Return `sql` with each `{slot}` turned into `?`, and the slot of each `?` in order (None: a `?` already
    there). For a statement run often: bind its parameters by the order, without parsing it each time."""
    order: list[str | None] = []

    def placeholder(m: re.Match) -> str:
        order.append(m.group(1))
        return "?"

    return re.sub(r"\{([a-z_]+)\}|\?", placeholder, sql), tuple(order)


def render(sql: str, names: Mapping[str, str]) -> str:
    """Return `sql` with each `{slot}` replaced by the SQL expression `names` gives for it (raises KeyError)."""
    return _SLOT.sub(lambda m: names[m.group(1)], sql)
