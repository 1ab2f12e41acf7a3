"""What `queuectl top` reads and does, through queuectl.api alone (never the CLI, never the store's methods).

Each interval one Source.read: one snapshot (queuectl.api.snapshot.take), the running jobs and
the dead letter queue's newest (queuectl.api.jobs.list_jobs, bounded lists), and one history read
(queuectl.api.history.window: the hour's minutes and their sum); this host's worker units from
systemd through queuectl.api.units (at most every queuectl.api.units.EVERY seconds, and only when a
worker of this host runs under a unit). Actions are the operations `pause`, `resume`, `cancel` and
`retry` call, each returning the line the footer shows.
"""

from __future__ import annotations

import time

from queuectl.domain.errors import QueuectlError
from queuectl.tui.model import DEAD_SHOWN, MINUTES, RUNNING_SHOWN, Reading
from queuectl.api import jobs
from queuectl.api.database import can_write
from queuectl.api.history import window
from queuectl.api.ops import cancel_now, retry, said_paused, set_paused
from queuectl.api.snapshot import take
from queuectl.api.units import Units


class Source:
    """The api calls of one viewer of `store` (a queuectl.store CommandStore)."""

    def __init__(self, store, clock=time.monotonic):
        self.store = store
        self.units = Units(clock=clock)

    def read(self) -> Reading:
        """Read what one interval shows; raises what the store's reads raise (DatabaseUnavailable in an outage)."""
        snap = take(self.store)
        running, _ = jobs.list_jobs(self.store, "processing", limit=RUNNING_SHOWN)
        dead, _ = jobs.list_jobs(self.store, "dead", limit=DEAD_SHOWN)
        rows, spans = window(self.store, since=MINUTES * 60.0, now=snap.now.wall)
        return Reading(snap, running, dead, rows, spans, self.units.of(snap.workers), self.store.describe())

    def job(self, job_id: str):
        """Return job `job_id` with its output as kept so far (queuectl.api.jobs.show); raises NotFound."""
        return jobs.show(self.store, job_id, output=True)

    def can_write(self) -> str | None:
        """None if this user may change the queue, else why not (queuectl.api.database.can_write)."""
        return can_write(self.store)

    def toggle_pause(self, queue: str, paused: bool) -> str:
        """Resume `queue` if `paused`, else pause it; return what happened, in words."""
        return self._act(lambda: said_paused("queue", queue, not paused,
                                             set_paused(self.store, [queue], not paused)[0][1]))

    def cancel(self, job_id: str) -> str:
        """Cancel job `job_id` without waiting for a running one to stop; return what happened, in words."""
        def act():  # an outage fails the action, not the view
            result = cancel_now(self.store, job_id)
            return f"job {job_id}: {result.error}" if result.error else f"job {job_id}: {result.description}"
        return self._act(act)

    def retry(self, job_id: str) -> str:
        """Move dead or cancelled job `job_id` back to pending; return what happened, in words."""
        return self._act(lambda: f"job {job_id}: retried, now {retry(self.store, [job_id])[0].value}")

    @staticmethod
    def _act(call) -> str:
        """Return `call()`'s line, or the domain error's (a bad state, a job gone, the database away)."""
        try:
            return call()
        except QueuectlError as e:
            return f"failed: {e}"
