"""Health: the heartbeat's timing, what a late heartbeat means, and the worker's STATUS= line.

No job starts while the last heartbeat is older than stale-after / 2: a worker held up
(frozen, starved) writes its heartbeat first, and so learns whether it was found stale and its
claims given back, before it starts what it claimed before. The heartbeat comes every
heartbeat-interval seconds, or sooner when systemd's watchdog needs pings (WatchdogSec).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from queuectl.domain.clock import STEP_TOLERANCE, Instant

log = logging.getLogger("queuectl.worker")


@dataclass
class Stats:
    """What this worker incarnation has done."""

    done: int = 0
    failed: int = 0
    recovered: int = 0

    def summary(self) -> str:
        """Return the counts in words, for the log and STATUS=."""
        recovered = f", {self.recovered} recovered" if self.recovered else ""
        return f"{self.done} done, {self.failed} failed{recovered}"


class Health:
    """When this worker beats, whether its last beat is fresh, and what a late one means.

    `notifier` (queuectl.host.notify.Notifier) tells the watchdog's interval; `watch` is the
    worker's liveness.Watch of the others; `monotonic` gives CLOCK_MONOTONIC seconds.
    """

    def __init__(self, notifier, watch, monotonic: Callable[[], float]):
        self.notifier = notifier
        self.watch = watch
        self.monotonic = monotonic
        self.last_beat: Instant | None = None
        self.next_beat = 0.0  # monotonic time of the next heartbeat

    def beat_due(self, now: float, reserved: bool, config: dict) -> bool:
        """Return True if the heartbeat is due at monotonic `now`: its time came, or jobs are `reserved`
        and the last beat is no longer fresh."""
        return now >= self.next_beat or (reserved and not self.fresh(now, config))

    def fresh(self, now: float, config: dict) -> bool:
        """Return True while the last heartbeat is younger than stale-after / 2 at monotonic `now`, so
        that no other worker can have found this one stale and given its claims back (queuectl.host.liveness)."""
        return self.last_beat is not None and now - self.last_beat.mono < config["stale-after"] / 2

    def interval(self, config: dict) -> float:
        """Return seconds to the next heartbeat: heartbeat-interval, or less when systemd's watchdog needs pings."""
        interval = config["heartbeat-interval"]
        if self.notifier.watchdog_interval is not None:
            interval = min(interval, self.notifier.watchdog_interval)
        return interval

    def beaten(self, now: float, config: dict) -> None:
        """Schedule the next heartbeat after the one written at monotonic `now`."""
        self.next_beat = now + self.interval(config)

    def note_gap(self, now: Instant, config: dict) -> None:
        """Look at the time since the last heartbeat: a wall-clock step, or a worker held up.

        A wall-clock step (wall delta against monotonic delta) is only logged: liveness, due
        times and rate windows are judged on monotonic clocks (queuectl.store.timing). A heartbeat that came late (a write that
        waited long for a lock, a process stopped or starved) means this worker could not
        watch the others meanwhile: they get stale-after to show a sign of life.
        """
        last, self.last_beat = self.last_beat, now
        if last is None:
            return
        step = (now.wall - last.wall) - (now.mono - last.mono)
        if abs(step) > STEP_TOLERANCE:
            log.warning("the wall clock stepped by %+.1f s since the last heartbeat; liveness, due times and"
                        " rate windows follow the monotonic clock, so no job is affected", step)
        if self.monotonic() - last.mono > 2 * self.interval(config) + 1:
            self.watch.writes_resumed(Instant(now.wall, self.monotonic(), now.domain))


def status_line(running: list[str], slots: int, stopping: bool, summary: str) -> str:
    """Return one line for systemd's STATUS= outside an outage: idle or the running jobs; the counts so far."""
    if stopping:
        head = f"draining {len(running)} job(s)"
    elif running:
        head = f"running {len(running)}/{slots} job(s)"
    else:
        head = f"idle, {slots} slot(s)"
    ids = f": {', '.join(running[:5])}{', ...' if len(running) > 5 else ''}" if running else ""
    return f"{head}{ids}; {summary}"
