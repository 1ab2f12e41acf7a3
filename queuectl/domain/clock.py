"""Readings of the clocks that queuectl's time rules need, taken together.

A wall clock (CLOCK_REALTIME) can be stepped: by NTP at boot, by `date -s`, by a resume
from suspend. CLOCK_MONOTONIC cannot, and it does not count time spent suspended, which
is what liveness wants: a suspend freezes every process of the host at once, so it is
no sign that one of them hung (CLOCK_BOOTTIME would count it, and after a resume every
worker would find every other one stale). Monotonic readings compare only within one
clock domain: one kernel boot, named by its boot id (clock_domain).
"""

from functools import lru_cache
from typing import NamedTuple

#: Seconds by which two wall-clock readings may disagree before queuectl takes it for a step.
STEP_TOLERANCE = 1.0


class Instant(NamedTuple):
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


@lru_cache(maxsize=1)
def boot_id() -> str:
    """Return this boot's identity: "BOOT_ID BTIME" (either part may be empty if unreadable).

    BOOT_ID is /proc/sys/kernel/random/boot_id and BTIME the boot time in Unix seconds
    from /proc/stat (proc(5)). Both are kept because neither alone is enough: inside a
    systemd-nspawn container, a service with ProtectKernelTunables= or ProtectProc= sees
    the kernel's boot_id while a shell sees the container's, but both see one btime; and
    btime alone moves when the wall clock is stepped. See same_boot.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            kernel = f.read().strip()
    except OSError:
        kernel = ""
    btime = ""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    btime = line.split()[1]
                    break
    except OSError:
        pass
    return f"{kernel} {btime}"


def clock_domain() -> str:
    """Return the identity of this boot's CLOCK_MONOTONIC: the kernel's boot id ("" if unreadable).

    Two processes that report the same boot id read one monotonic clock (barring time
    namespaces, which queuectl does not support), so their monotonic readings compare.
    Processes of one host that see different ids (a sandboxed service and a shell inside
    a systemd-nspawn container) fall back to comparing wall clocks.
    """
    return boot_id().partition(" ")[0]
