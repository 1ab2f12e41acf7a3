"""The queue's activity over time, from the history the store keeps per queue and minute (queuectl.store.activity):
`history` (rows per minute or hour, with wait and run time percentiles), `window` (the steps and the whole
span, from one read), `rates` (`queuectl status`'s jobs per minute) and `quantile` (Prometheus's
histogram_quantile on the store's buckets). docs/semantics.md, "Activity history", gives the rules.
"""

import math
from typing import NamedTuple

from queuectl.store.activity import BOUNDS, COUNTS, added
from queuectl.domain.errors import InvalidInput
from queuectl.domain.jobspec import check_queue

#: The steps `history` sums minutes into: a minute, an hour (seconds).
STEPS = (60.0, 3600.0)
#: The windows of `rates`, minutes.
RATE_WINDOWS = {"1m": 1, "5m": 5, "15m": 15}


HistoryRow = NamedTuple("HistoryRow", [("at", float), ("queue", str), *((c, int) for c in COUNTS),
                                       *((f"{kind}_{p}", float | None) for kind in ("wait", "run") for p in ("p50", "p95"))])
HistoryRow.__doc__ = """A step of history: `at` its start (Unix seconds), `queue` ("" for all queues summed), the jobs
that started, completed, failed (a retry scheduled), went dead, were cancelled and were recovered from lost workers in
it (queuectl.store.activity.COUNTS, each a field), and the 50th and 95th percentiles of their wait (start - due) and run
(end - start) times, seconds (None without a sample): wait_p50, wait_p95, run_p50, run_p95."""


def quantile(q: float, buckets, bounds=None) -> float | None:
    """Return the `q` quantile (0..1) of the samples counted in `buckets` (counts per bucket of `bounds`, default
    queuectl.store.activity.BOUNDS, not cumulative), or None without samples.

    As Prometheus's histogram_quantile: linear within the bucket the rank falls in (the first bucket's lower
    bound is 0); a rank in the +Inf bucket gives the highest finite bound. Rounded to the microsecond: an
    estimate within a bucket, not a measurement (no 1.8999999999999995).
    """
    bounds = BOUNDS if bounds is None else bounds
    total = sum(buckets)
    if total <= 0:
        return None
    rank, below, lower = q * total, 0, 0.0
    for upper, n in zip(bounds, buckets):
        if n and below + n >= rank:
            if math.isinf(upper):
                return lower
            return round(lower + (upper - lower) * (rank - below) / n, 6)
        below += n
        if not math.isinf(upper):
            lower = upper
    return lower


def _now(store, now: float | None) -> float:
    return store.clock() if now is None else now


def history(store, *, queue: str | None = None, since: float = 3600.0, step: float = 60.0, by_queue: bool = True,
            now: float | None = None) -> list[HistoryRow]:
    """Return the activity of the last `since` seconds in steps of `step` (60 or 3600 seconds), oldest first,
    then by queue; steps with no activity are absent.

    `queue`: that queue's alone; `by_queue=False` sums all queues into rows of queue "". A step is aligned on
    the store's clock (a minute or an hour of Unix time); the first is the one `now - since` falls in.
    `now`: Unix seconds on the store's clock (default: now). Raises InvalidInput for another step, a
    negative `since` or a queue name that is not one.
    """
    if step not in STEPS:
        raise InvalidInput(f"a history step is 1m or 1h, got {step:g} s")
    _, minutes = _minutes(store, queue, since, now, step)
    return _rows(minutes, lambda r: (r.minute // step * step, r.queue if by_queue else ""))


def window(store, *, since: float = 3600.0, step: float = 60.0, by_queue: bool = True,
           now: float | None = None) -> tuple[list[HistoryRow], dict[str, HistoryRow]]:
    """Return, from one read, `history`'s rows for these arguments and {queue ("" when not `by_queue`): the
    whole span summed into one HistoryRow, `at` the first step's start}: percentiles over the span, not one
    step's (what `queuectl top` and the dashboard's charts show). Raises InvalidInput as `history`."""
    if step not in STEPS:
        raise InvalidInput(f"a history step is 1m or 1h, got {step:g} s")
    first, minutes = _minutes(store, None, since, now, step)
    spans = _rows(minutes, lambda r: (first, r.queue if by_queue else ""))
    steps = _rows(minutes, lambda r: (r.minute // step * step, r.queue if by_queue else ""))
    return steps, {row.queue: row for row in spans}


def _minutes(store, queue: str | None, since: float, now: float | None, step: float) -> tuple[float, list]:
    """The start of the step (seconds) that `now - since` falls in, and the store's ActivityRows from it to `now`,
    summed per step by the store."""
    if queue is not None:
        check_queue(queue)
    if not math.isfinite(since) or since < 0:
        raise InvalidInput(f"a history span must be 0 s or more, got {since!r}")
    end = _now(store, now)
    first = (end - since) // step * step
    return first, store.activity(first, end, queue, int(step))


def _rows(minutes, key) -> list[HistoryRow]:
    """ActivityRows summed by `key(row)` = (at, queue), as HistoryRows sorted by that key."""
    summed: dict[tuple[float, str], object] = {}
    for r in minutes:
        k = key(r)
        summed[k] = added(summed[k], r) if k in summed else r
    return [HistoryRow(at, q, *(getattr(r, c) for c in COUNTS),
                       quantile(0.5, r.wait), quantile(0.95, r.wait), quantile(0.5, r.run), quantile(0.95, r.run))
            for (at, q), r in sorted(summed.items())]


def rates(store, now: float | None = None) -> dict:
    """Return {"1m", "5m", "15m": {"completed": jobs, "failed": jobs}}: jobs per minute over the last 1, 5 and 15
    minutes, of all queues ("failed": retries scheduled).

    The window is the last N minutes up to `now` (Unix seconds on the store's clock; default now): the minutes
    that begin in it whole, and of the minute it begins in the share that lies in the window (as if its jobs
    were spread evenly over it).
    """
    end = _now(store, now)
    current = end // 60 * 60
    longest = max(RATE_WINDOWS.values())
    rows = store.activity(current - 60 * longest, end)
    share = 1 - (end - current) / 60  # of the minute a window begins in, the part inside it
    out = {}
    for name, minutes in RATE_WINDOWS.items():
        first = current - 60 * minutes  # the minute the window begins in
        sums = {"completed": 0.0, "failed": 0.0}
        for r in rows:
            if r.minute >= first:
                weight = share if r.minute == first else 1.0
                sums["completed"] += weight * r.completed
                sums["failed"] += weight * r.failed
        out[name] = {k: round(v / minutes, 3) for k, v in sums.items()}
    return out
