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
from typing import Callable

from queuectl.domain import settings as settings_mod
from queuectl.domain.clock import Instant
from queuectl.store import PURGE_BATCH
from queuectl.store.interface import WorkerStore
from queuectl.store.base import HISTORY_BATCH, MINUTES_KEPT

log = logging.getLogger("queuectl.worker")

#: Seconds between retention passes, at most (while there is a backlog, a batch every turn of
#: the loop; with short keep-* settings, twice per the shortest, but not more than once a second).
RETENTION_EVERY = 60.0
#: Seconds between log lines about deletions, at most.
LOG_EVERY = 10.0


class Retention:
    """When and how much a worker deletes: `due(now)` says whether a pass is due, `run(now)` does one.

    It takes what it uses: the store; `worker_id`, the registered worker's id (a callable, read at each
    pass: the "retention" lease is taken in its name); `settings`, the settings in force (a callable: the
    worker reloads them at each heartbeat); and `now`, the worker's clocks (a queuectl.domain.clock.Instant).
    """

    def __init__(self, store: WorkerStore, worker_id: Callable[[], int], settings: Callable[[], dict],
                 now: Callable[[], Instant]):
        self.store, self.worker_id, self.settings, self.now = store, worker_id, settings, now
        self._at = 0.0  # monotonic time of the next pass
        self._deleted = 0  # deleted since the last log line
        self._logged_at = 0.0

    def due(self, now: float) -> bool:
        """Return True if a pass is due at monotonic `now` (CLOCK_MONOTONIC seconds)."""
        return now >= self._at

    def wake_at(self) -> float:
        """Return inf: a pass waits for the loop's next turn."""
        return float("inf")

    def run(self, now: float) -> int:
        """Do one pass at the worker's clocks now (`now`, the loop's monotonic reading, is not used); return
        how many jobs it deleted (0 when another worker holds the "retention" lease).

        The next pass is due half the shortest keep-* (or keep-history, or MINUTES_KEPT) later, at least 1 s
        and at most RETENTION_EVERY s; at the next turn if a batch was full (a backlog). Raises DatabaseError
        if the pass fails.
        """
        config, at = self.settings(), self.now()
        older = settings_mod.kept_ages(config)
        history = config["keep-history"]
        ages = [*older.values(), *([] if history is None else [history]), MINUTES_KEPT]
        self._at = at.mono + min(RETENTION_EVERY, max(1.0, min(ages) / 2))
        if not self.store.take_lease("retention", self.worker_id(), at, 3 * RETENTION_EVERY):
            return 0
        deleted = self.store.purge(older, at) if older else 0
        minutes = self.store.purge_history(None if history is None else at.wall - history, at.wall - MINUTES_KEPT)
        if deleted >= PURGE_BATCH or minutes >= HISTORY_BATCH:
            self._at = at.mono  # a backlog: go on at the next turn
        self._deleted += deleted
        if self._deleted and at.mono - self._logged_at >= LOG_EVERY:
            log.info("retention: deleted %d expired job(s)", self._deleted)
            self._deleted, self._logged_at = 0, at.mono
        return deleted
