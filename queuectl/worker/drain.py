"""A worker's stop: it drains (docs/semantics.md, "Stopping a worker").

The first stop request (SIGTERM, SIGINT: `systemctl stop`) is announced (the log, systemd's STOPPING=1), the
drain is recorded in the store once (`status` shows the worker draining), the jobs claimed and not started are
given back, and the running jobs run to their end, the log saying which every DRAIN_SAY_EVERY seconds. A second
request forces the stop: the running jobs are sent SIGTERM and put back to pending (the ledger's `forced`).
Times are CLOCK_MONOTONIC seconds.
"""

from __future__ import annotations

import logging
import signal
from typing import Callable

from queuectl.domain.clock import Instant
from queuectl.domain.models import DRAIN_SAY_EVERY, waiting_line

log = logging.getLogger("queuectl.worker")


class Drain:
    """What a worker's stop does, from the parts it acts on: the store (the drain recorded), the runner (the
    running jobs said, or stopped when forced), the ledger (the forced jobs, and those given back), the claim
    policy (its reserve given back) and the notifier (STOPPING=1)."""

    def __init__(self, store, runner, ledger, claims, notifier):
        self.store, self.runner, self.ledger, self.claims, self.notifier = store, runner, ledger, claims, notifier
        self.forced = False  # a second stop request stopped the running jobs
        self._recorded = False
        self._said_at = float("-inf")  # when the drain last said what it waits for (the first at once: a turn may
        # say it before the request is announced, and says it once)

    def announce(self, requests: int, announced: int) -> int:
        """Announce the stop requests after the `announced` first ones (of `requests` so far); return `requests`.

        The first says the drain begins; the second, while jobs run, stops them (SIGTERM), to be put back.
        """
        running = self.runner.running
        if announced == 0:
            log.info("stop requested: draining %d running job(s); a second signal stops them", len(running))
            self.notifier.stopping(f"draining {len(running)} job(s)")
        if requests >= 2 and running and not self.ledger.forced:
            log.warning("second stop request: terminating %d running job(s) and requeueing them", len(running))
            self.ledger.forced.update(running)
            self.forced = True
            self.runner.stop_all(signal.SIGTERM)
        return requests

    def begin(self, worker_id: int, now: Callable[[], Instant]) -> None:
        """In each turn of a stopping worker: record once that it drains (at `now()`, the worker's clocks, read
        then only), and give back what it claimed and has not started."""
        if not self._recorded:
            self.store.mark_draining(worker_id, now())
            self._recorded = True
        self.give_back(list(self.claims.reserve))

    def give_back(self, jobs) -> None:
        """Give back claimed jobs not started: out of the reserve, released by the next exchange."""
        for job in jobs:
            self.claims.reserve.remove(job)
            self.ledger.release.append(job.id)

    def say(self, now: float) -> None:
        """While draining, log what the drain waits for every DRAIN_SAY_EVERY seconds
        (queuectl.domain.models.waiting_line), so that a `systemctl stop`'s journal says it."""
        running = self.runner.running
        if running and now >= self._said_at + DRAIN_SAY_EVERY:
            self._said_at = now
            log.info("%s", waiting_line([(key, now - job.started) for key, job in running.items()]))

    def ended(self, requests: int) -> str:
        """How the worker ends, as stopped_workers keeps it: forced (a second stop request stopped running jobs),
        drained (stopped on request), or burst (out of work)."""
        if self.forced:
            return "forced"
        return "drained" if requests else "burst"
