"""The worker's duty of stopping the jobs whose cancel was requested (`queuectl cancel`).

A worker looks for cancel requests after each heartbeat and each wake-up (`cancel` pokes the
worker that holds the job), and only while it holds jobs. A running job is stopped by SIGTERM
to its process group (SIGKILL after the grace), and the store then records it cancelled (or
completed, if it exited 0 first); a claimed job not started is given back, and the store
records it cancelled.
"""

from __future__ import annotations

import logging
import signal

log = logging.getLogger("queuectl.worker")


class Cancels:
    """Stops the cancelled jobs of one worker (`worker`: the Worker it serves)."""

    def __init__(self, worker):
        self.worker = worker
        self.look = True  # set by each heartbeat and wake-up: `queuectl cancel` pokes
        self.cancelling: dict[str, object] = {}  # job id -> its run (the runner's handle) sent SIGTERM for a cancel

    def requested(self) -> None:
        """Look for cancel requests at the next turn (a heartbeat was written, a wake-up came)."""
        self.look = True

    def due(self, now: float) -> bool:
        """Return True if a look is due: one was asked for and this worker holds jobs."""
        w = self.worker
        return self.look and bool(w.runner.running or w.claims.reserve)

    def run(self, now: float) -> None:
        """Stop the jobs whose cancel was requested: running ones by SIGTERM to the group (SIGKILL after the
        grace), claimed ones not started by giving them back; raises DatabaseError if the look fails."""
        w = self.worker
        self.look = False
        requested = set(w.store.cancel_requests(w.worker_id))
        w.drain.give_back([job for job in w.claims.reserve if job.id in requested])
        for job_id in requested:
            job = w.runner.running.get(job_id)
            if job is not None and self.cancelling.get(job_id) is not job:  # a run retried after a cancel is new
                self.cancelling[job_id] = job
                log.warning("job %s: cancel requested, stopping its process group", job_id)
                job.stop(signal.SIGTERM, w.monotonic(), w.runner.kill_grace)
        self.cancelling = {k: v for k, v in self.cancelling.items() if w.runner.running.get(k) is v}

    def wake_at(self) -> float:
        """Return inf: cancels are looked for at heartbeats and wake-ups, which the loop waits for anyway."""
        return float("inf")
