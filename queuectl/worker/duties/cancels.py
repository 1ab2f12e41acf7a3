"""The worker's duty of stopping the jobs whose cancel was requested (`queuectl cancel`).

A worker looks for cancel requests after each heartbeat and each wake-up (`cancel` pokes the
worker that holds the job), and only while it holds jobs. A running job is stopped by SIGTERM
to its process group (SIGKILL after the runner's kill grace), and the store then records it
cancelled (or completed, if it exited 0 first); a claimed job not started is given back through
the drain (queuectl.worker.drain), and the store records it cancelled at the next exchange.
"""

from __future__ import annotations

import logging
import signal
from typing import Callable, NamedTuple

from queuectl.host.runner import Runner
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.drain import Drain

log = logging.getLogger("queuectl.worker")


class Cancelled(NamedTuple):
    """What a look for cancel requests did: the running jobs it sent SIGTERM, the claimed ones it gave back (ids)."""

    stopped: list[str]
    given_back: list[str]


class Cancels:
    """Stops the cancelled jobs of one worker, from the parts it acts on: the store (the worker's cancel requests),
    `worker_id` (a callable: the registered worker's id, read at each look), the runner (the running jobs, its
    clock and kill grace), the claim policy (the reserve of jobs claimed and not started) and the drain (which
    gives them back)."""

    def __init__(self, store, worker_id: Callable[[], int], runner: Runner, claims: ClaimPolicy, drain: Drain):
        self.store, self.worker_id, self.runner, self.claims, self.drain = store, worker_id, runner, claims, drain
        self.look = True  # set by each heartbeat and wake-up: `queuectl cancel` pokes
        self.cancelling: dict[str, object] = {}  # job id -> its run (the runner's handle) sent SIGTERM for a cancel

    def requested(self) -> None:
        """Look for cancel requests at the next turn (a heartbeat was written, a wake-up came)."""
        self.look = True

    def due(self, now: float) -> bool:
        """Return True if a look is due: one was asked for and this worker holds jobs (running or claimed)."""
        return self.look and bool(self.runner.running or self.claims.reserve)

    def run(self, now: float) -> Cancelled:
        """Stop the jobs whose cancel was requested: running ones by SIGTERM to the group (SIGKILL after the
        runner's kill grace, in seconds), claimed ones not started by giving them back; return what it did.
        A run already sent SIGTERM for a cancel is not sent it again. Raises DatabaseError if the look fails,
        having stopped nothing."""
        self.look = False
        requested = set(self.store.cancel_requests(self.worker_id()))
        back = [job for job in self.claims.reserve if job.id in requested]
        self.drain.give_back(back)
        running, stopped = self.runner.running, []
        for job_id in requested:
            job = running.get(job_id)
            if job is not None and self.cancelling.get(job_id) is not job:  # a run retried after a cancel is new
                self.cancelling[job_id] = job
                log.warning("job %s: cancel requested, stopping its process group", job_id)
                job.stop(signal.SIGTERM, self.runner.clock(), self.runner.kill_grace)
                stopped.append(job_id)
        self.cancelling = {k: v for k, v in self.cancelling.items() if running.get(k) is v}
        return Cancelled(sorted(stopped), [job.id for job in back])

    def wake_at(self) -> float:
        """Return inf: cancels are looked for at heartbeats and wake-ups, which the loop waits for anyway."""
        return float("inf")
