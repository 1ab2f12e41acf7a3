"""This host's worker units as systemd tells them (queuectl.host.units.show), for the views that show workers
(`queuectl top`, the dashboard): read at most every EVERY seconds whoever asks, and only while a worker of
this host runs under a unit.

systemd is asked on this host only: a worker registered from another host has no unit state here (its
unit's name may be the same as one of this host's, and is another unit).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, NamedTuple
from queuectl.host import procs
from queuectl.host.units import show

#: Seconds between two reads of the worker units' properties (a systemctl process each).
EVERY = 10.0


class UnitState(NamedTuple):
    """A worker's systemd unit: its `unit` name (Id), `active` and `sub` state (ActiveState, SubState:
    "active" and "running", "activating" and "auto-restart", ...) and how often systemd restarted it
    (`restarts`: NRestarts, since its last start by hand)."""

    unit: str
    active: str
    sub: str
    restarts: int


def unit_state(props: dict[str, str]) -> UnitState:
    """Return the UnitState of one unit's properties as queuectl.host.units.show gives them."""
    try:
        restarts = int(props.get("NRestarts") or 0)
    except ValueError:
        restarts = 0
    return UnitState(props["Id"], props.get("ActiveState", ""), props.get("SubState", ""), restarts)


class Units:
    """The unit states of this host's workers, read through `show` (queuectl.host.units.show: names to a list of
    properties) at most every `every` seconds; one instance may serve many threads (a lock: callers that
    arrive together while it is read wait for that one reading). `reads` counts the reads."""

    def __init__(self, every: float = EVERY, clock: Callable[[], float] = time.monotonic,
                 show: Callable | None = None):
        self.every = every
        self._clock = clock
        self._show = show
        self._lock = threading.Lock()
        self._at: float | None = None
        self._names: tuple[str, ...] = ()
        self._by_unit: dict[str, UnitState] = {}
        self.reads = 0

    def of(self, workers) -> dict[int, UnitState]:
        """Return {worker id: its unit's state} for those of `workers` (queuectl.api.snapshot's: each with an
        `info`, queuectl.domain.models.WorkerInfo) that run under a unit on this host and that systemd knows; {} with
        no such worker (and then systemd is not asked) or without systemd."""
        host = procs.hostname()
        here = [w.info for w in workers if w.info.unit and w.info.host == host]
        if not here:
            return {}
        by_unit = self._read(tuple(sorted({info.unit for info in here})))
        return {info.id: by_unit[info.unit] for info in here if info.unit in by_unit}

    def _read(self, names: tuple[str, ...]) -> dict[str, UnitState]:
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self.every or not set(names) <= set(self._names):
                self._by_unit = {u["Id"]: unit_state(u) for u in (self._show or _systemd)(names)}
                self._names, self._at = names, now
                self.reads += 1
            return self._by_unit


def _systemd(names: tuple[str, ...]) -> list[dict[str, str]]:
    """queuectl.host.units.show, imported when first asked (never on the CLI's other paths)."""
    return show(names)
