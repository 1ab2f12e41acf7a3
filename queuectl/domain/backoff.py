"""Retries: how many a job has, when its last attempt comes, and the delay before each."""

import math


def retry_limit(max_retries: int | None, config: dict) -> int:
    """Return the retries a job has after its first run: its own `max_retries`, else the
    `max-retries` setting of `config` (the settings in force)."""
    return config["max-retries"] if max_retries is None else max_retries


def last_attempt(attempts: int, max_retries: int | None, config: dict) -> bool:
    """True if a job with `attempts` counted runs its last attempt next: if that fails, it is dead.

    The rule that bounds a job's runs when it takes its worker down (docs/semantics.md, Bounded runs):
    a start is recorded lazily, so a recovery that finds a claimed job with no start recorded
    counts the attempt (it may have run), unless it was the job's last, whose start a worker
    records before it runs (queuectl.worker): that one cannot have run, and goes back uncounted.
    """
    return attempts >= retry_limit(max_retries, config)


def backoff_delay(attempts: int, base: float, cap: float) -> float:
    """Return the delay in seconds before the next retry: ``base ** attempts``, at most ``cap``.

    `attempts` is how many times the job has run (1 after the first failure), `base` >= 1,
    `cap` >= 0 seconds. Never overflows: the exponent is compared in log space first, so
    attempts of any size (even 10**100) return `cap`. Raises ValueError for base < 1,
    negative attempts or a negative cap.
    """
    if base < 1 or attempts < 0 or cap < 0:
        raise ValueError(f"bad backoff arguments: attempts={attempts} base={base} cap={cap}")
    if base == 1:
        return min(1.0, float(cap))
    if cap == 0:
        return 0.0
    # Compare in log space; int >= float is exact in Python even for huge ints.
    if attempts >= math.log(cap) / math.log(base):
        return float(cap)
    return float(base) ** attempts


def delay_text(seconds: float) -> str:
    """Return a delay in seconds as the lines about retries say it: to a tenth, "4 s", "0.5 s"."""
    return f"{round(max(seconds, 0.0), 1):g} s"


def retry_text(attempt: int, retries: int, delay: float) -> str:
    """Return how a failed attempt goes on: "retry 2/3 in 4 s" after attempt 2 of a job with 3 retries,
    retried `delay` seconds later (the worker's log line of a failure: queuectl.worker.exchange)."""
    return f"retry {attempt}/{retries} in {delay_text(delay)}"
