"""The worker's duty of firing schedules' due slots (queuectl.store.schedules has the rules).

Every running worker looks about once a second (CHECK_EVERY), and at each slot's time when
it knows it, so a slot fires within about a second of its time whichever workers run; the
store makes sure that each slot fires once however many look. A draining worker fires
nothing.
"""

from __future__ import annotations

import logging
from typing import Callable

from queuectl.domain.clock import Instant
from queuectl.domain.models import iso
from queuectl.store.schedules import Fired
from queuectl.worker.claims import ClaimPolicy

log = logging.getLogger("queuectl.worker")

#: Seconds between looks for due slots, at most (a schedule added since is seen within this).
CHECK_EVERY = 1.0


class Schedules:
    """When a worker looks for due slots: `due(now)` says whether a look is due, `run(now)` does one.

    It takes what it uses: the store; the claim policy, told to claim at once when a slot added a job; and
    `now`, the worker's clocks (a queuectl.domain.clock.Instant).
    """

    def __init__(self, store, claims: ClaimPolicy, now: Callable[[], Instant]):
        self.store, self.claims, self.now = store, claims, now
        self._at = 0.0  # monotonic time of the next look

    def due(self, now: float) -> bool:
        """Return True if a look is due at monotonic `now` (CLOCK_MONOTONIC seconds)."""
        return now >= self._at

    def wake_at(self) -> float:
        """Return the monotonic time of the next look (CLOCK_MONOTONIC seconds)."""
        return self._at

    def run(self, now: float) -> list[Fired]:
        """Fire what is due at the worker's clocks now (`now`, the loop's monotonic reading, is not used); log
        each slot; return what the store did with each (queuectl.store.schedules.Fired).

        A slot that added a job makes the worker claim now, not at the next poll. The next look is due at the
        next slot's time, CHECK_EVERY seconds later at most. Raises DatabaseError if the look fails.
        """
        at = self.now()
        fired, next_slot = self.store.fire_schedules(at)
        wait = CHECK_EVERY if next_slot is None else min(CHECK_EVERY, max(0.0, next_slot - at.wall))
        self._at = at.mono + wait
        if any(f.outcome == "added" for f in fired):
            self.claims.claim_now()  # claim the new runs now, not at the next poll
        for f in fired:
            if f.missed is not None:
                log.warning("schedule %s: the slots from %s until %s passed unfired (no worker looked in time): one catch-up"
                            " run, %s", f.schedule, iso(f.missed[0]), iso(f.missed[1]), f.job_id)
            if f.outcome == "added":
                log.info("schedule %s: slot %s: enqueued %s", f.schedule, iso(f.slot), f.job_id)
            elif f.outcome == "skipped":
                log.warning("schedule %s: slot %s skipped: job %s, which holds the runs' key, has not ended"
                            " (overlap skip)", f.schedule, iso(f.slot), f.holder)
            elif f.outcome == "invalid":
                log.error("schedule %s: slot %s passed: its template is not valid (%s)", f.schedule, iso(f.slot),
                          f.holder)
            else:
                log.info("schedule %s: slot %s: job %s exists already (fired before)", f.schedule, iso(f.slot),
                         f.job_id)
        return fired
