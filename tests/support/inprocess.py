"""What the fast tier hands the code it runs in-process in place of the real thing: a monotonic clock the test
moves (Clock), a notifier that keeps what a worker tells systemd (Notifier); and an in-process Worker on them
(make_worker), with the end of a real job runner (stop_runner)."""

from __future__ import annotations

import signal

from queuectl.worker import Worker


class Clock:
    """A monotonic clock that moves only when told (`clock.now += seconds`) or slept on (`sleep`, which counts
    the sleeps in `sleeps`)."""

    START = 1000.0

    def __init__(self, start: float = START):
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Notifier:
    """What a worker tells systemd, kept: the watchdog pings counted (`pings`), the statuses of STOPPING=1
    (`stopping_said`); READY and STATUS go nowhere. `watchdog_interval` as systemd's WatchdogSec would set it."""

    def __init__(self, watchdog_interval=None):
        self.watchdog_interval = watchdog_interval
        self.pings = 0
        self.stopping_said: list[str] = []

    def watchdog(self) -> None:
        self.pings += 1

    def ready(self, status: str) -> None:
        pass

    status = ready

    def stopping(self, status: str) -> None:
        self.stopping_said.append(status)


def make_worker(store, clock: Clock, slots: int = 1, name: str = "tick") -> Worker:
    """A Worker called `name` on `store`, registered, on `clock` (its wall clock 1,000,000 s ahead of it), telling
    a Notifier; stop_runner(w.runner) ends its jobs."""
    w = Worker(store, name, slots=slots, monotonic=clock, clock=lambda: 1_000_000.0 + clock.now, notifier=Notifier())
    w.register()
    return w


def stop_runner(runner) -> None:
    """Kill the jobs `runner` (queuectl.host.runner.Runner) still runs, reap them, and close it."""
    runner.stop_all(signal.SIGKILL)
    while runner.running:
        runner.wait(None)
    runner.close()
