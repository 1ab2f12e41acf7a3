"""Retention: the worker's duty of deleting expired finished jobs (keep-completed, keep-cancelled, keep-dead)
and the activity history's expired minutes (keep-history, folded into each queue's totals as they go), and its
minutes older than a day rolled up into hours (queuectl.store.base.MINUTES_KEPT).

One worker at a time does it, the holder of the "retention" lease. A pass is one short
transaction of at most PURGE_BATCH jobs, and one of about HISTORY_BATCH minutes (the store gives freed space back by itself); a
full batch brings the next pass at the next turn of the worker's loop, so a backlog goes in
bounded steps that let claims go on between them.
"""

from __future__ import annotations

import logging

from queuectl.domain import settings as settings_mod
from queuectl.domain.clock import Instant
from queuectl.store import PURGE_BATCH, WorkerStore
from queuectl.store.base import HISTORY_BATCH, MINUTES_KEPT

log = logging.getLogger("queuectl.worker")

#: Seconds between retention passes, at most (while there is a backlog, a batch every turn of
#: the loop; with short keep-* settings, twice per the shortest, but not more than once a second).
RETENTION_EVERY = 60.0
#: Seconds between log lines about deletions, at most.
LOG_EVERY = 10.0


class Retention:
    """When and how much a worker deletes: `due(now)` says whether a pass is due, `run(now)` does one.

    `worker` is the Worker it serves (its store, worker_id, config and clocks).
    """

    def __init__(self, worker):
        self.worker = worker
        self._at = 0.0  # monotonic time of the next pass
        self._deleted = 0  # deleted since the last log line
        self._logged_at = 0.0

    def due(self, now: float) -> bool:
        """Return True if a pass is due at monotonic `now` (CLOCK_MONOTONIC seconds)."""
        return now >= self._at

    def run(self, now: float) -> None:
        """Do one pass; raises DatabaseError if it fails."""
        w = self.worker
        self.purge(w.store, w.worker_id, w.config, w.now())

    def wake_at(self) -> float:
        """Return inf: a pass waits for the loop's next turn."""
        return float("inf")

    def purge(self, store: WorkerStore, worker_id: int, config: dict, now: Instant) -> int:
        """Do one pass at `now` (it must carry this process's monotonic reading); return how many jobs it deleted."""
        older = settings_mod.kept_ages(config)
        history = config["keep-history"]
        ages = [*older.values(), *([] if history is None else [history]), MINUTES_KEPT]
        self._at = now.mono + min(RETENTION_EVERY, max(1.0, min(ages) / 2))
        if not store.take_lease("retention", worker_id, now, 3 * RETENTION_EVERY):
            return 0
        deleted = store.purge(older, now) if older else 0
        minutes = store.purge_history(None if history is None else now.wall - history, now.wall - MINUTES_KEPT)
        if deleted >= PURGE_BATCH or minutes >= HISTORY_BATCH:
            self._at = now.mono  # a backlog: go on at the next turn
        self._deleted += deleted
        if self._deleted and now.mono - self._logged_at >= LOG_EVERY:
            log.info("retention: deleted %d expired job(s)", self._deleted)
            self._deleted, self._logged_at = 0, now.mono
        return deleted
