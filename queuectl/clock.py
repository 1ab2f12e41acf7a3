"""Readings of the clocks that queuectl's time rules need, taken together.

A wall clock (CLOCK_REALTIME) can be stepped: by NTP at boot, by `date -s`, by a resume
from suspend. CLOCK_MONOTONIC cannot, and it does not count time spent suspended, which
is what liveness wants: a suspend freezes every process of the host at once, so it is
no sign that one of them hung (CLOCK_BOOTTIME would count it, and after a resume every
worker would find every other one stale). Monotonic readings compare only within one
clock domain: one kernel boot, named by its boot id (see queuectl.procs.clock_domain).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds by which two wall-clock readings may disagree before queuectl takes it for a step.
STEP_TOLERANCE = 1.0


@dataclass(frozen=True)
class Instant:
    """One moment on both clocks: `wall` in Unix seconds, `mono` in CLOCK_MONOTONIC seconds of `domain`.

    `mono` and `domain` are None when only the wall clock was read (a caller that passes
    a bare Unix time): times are then scheduled and compared on the wall clock alone.
    """

    wall: float
    mono: float | None = None
    domain: str | None = None


def instant(when: "Instant | float") -> Instant:
    """Return `when` as an Instant; a bare number is a wall-clock reading (Unix seconds)."""
    return when if isinstance(when, Instant) else Instant(float(when))
