"""Retry delays."""

import math


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
