"""Per-queue limits: at most N jobs of a queue processing at once, and at most COUNT started per window."""

from __future__ import annotations

from queuectl.domain.errors import InvalidInput
from queuectl.domain.jobspec import check_queue
from queuectl.domain.settings import parse_duration
from queuectl.store.limits import UNCHANGED, check_limits


def parse_rate(text: str) -> tuple[int, float]:
    """Return COUNT/DURATION (30/1m, 5/2s) as (count, window seconds); raises InvalidInput."""
    count, slash, window = text.partition("/")
    try:
        n = int(count)
    except ValueError:
        n = 0
    seconds = parse_duration(window, "--rate's window", forever=False) if slash and window.strip() else None
    try:
        check_limits(rate=(n, seconds or 0.0))  # no slash: no window, refused
    except InvalidInput as e:
        raise InvalidInput(f"{e}; got {text!r}") from None
    return n, seconds


def check(concurrency: int | None = None, rate: str | None = None, clear: bool = False):
    """Check a change of limits before the store is opened: a concurrency, a rate (COUNT/DURATION), or
    `clear` alone; return the rate as `set_limit` takes it (UNCHANGED when None). Raises InvalidInput."""
    if clear and (concurrency is not None or rate is not None):
        raise InvalidInput("give --clear alone, or --concurrency and/or --rate")
    check_limits(UNCHANGED if concurrency is None else concurrency)
    return parse_rate(rate) if rate is not None else UNCHANGED


def set_limit(store, queue: str, concurrency: int | None = None, rate: str | None = None, clear: bool = False):
    """Set (or with `clear` remove) `queue`'s limits, leaving those not given as they are; return the
    queuectl.domain.models.QueueLimit kept (its `text` is "-" for none). Raises InvalidInput."""
    window = check(concurrency, rate, clear)
    check_queue(queue)
    if clear:
        return store.set_limit(queue, store.now(), concurrency=None, rate=None)
    return store.set_limit(queue, store.now(), concurrency=UNCHANGED if concurrency is None else concurrency,
                           rate=window)


def limits(store, queue: str | None = None) -> list:
    """Return the limited queues' QueueLimit (only `queue`'s if given), by name."""
    if queue is not None:
        check_queue(queue)
    return [q for q in store.queue_limits() if queue in (None, q.queue)]
