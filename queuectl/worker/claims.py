"""The claim policy: how many jobs a worker claims, how far ahead, and when it gives them back.

- Claims: as many as free slots; while jobs are short (the last one ended within HOLD seconds
  of its start) also up to PREFETCH_PER_SLOT x slots ahead (the reserve), topped up once the
  reserve is half used, so that a slot that frees starts the next job at once, with the
  database's work done while jobs run. A claimed job counts no attempt until its start is
  recorded. A job held in the reserve behind slots all busy with jobs running HOLD seconds or
  more is given back (released) at once: a long job never keeps another worker from the jobs
  behind it. Fairness: no worker holds more than slots + PREFETCH_PER_SLOT x slots jobs.
- After a claim that found the queue short, the next claim waits for the poll interval; a wake-up
  (a new job, a cancel) or a schedule's new run claims at once.
- Jobs of a limited queue (queuectl.store.limits) are claimed ahead within half the room the
  limit leaves; when one ends, the worker claims again at once (its place in the limit is free),
  not at the next poll, and a claim that a rate limit held back is tried again when the window
  frees a place (Store.rate_room_at), if that comes before the poll.

Times are CLOCK_MONOTONIC seconds unless named `wall`.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import Job

#: Seconds below which a job counts as short (the worker then claims ahead), and the longest a
#: claimed-ahead job waits behind slots that are all busy before it is given back.
HOLD = 0.02
#: Jobs claimed ahead per slot while jobs are short (the module's rules).
PREFETCH_PER_SLOT = 8
#: The shortest wait for a rate limit's window to free a place (so that clocks read a moment apart never
#: make a worker claim in a loop).
RATE_WAIT_MIN = 0.01


class ClaimPolicy:
    """One worker's claims: the reserve (claimed, not started), how many to claim, and when (the module's rules).

    `store` is read for its limited queues and their rate room only; `queues` are the worker's
    (empty: every queue); `slots` how many jobs it runs at once.
    """

    def __init__(self, store, queues: Sequence[str], slots: int):
        self.store = store
        self.queues = queues
        self.slots = slots
        self.prefetch = PREFETCH_PER_SLOT * slots
        self.reserve: deque[Job] = deque()  # claimed, not started
        self.short = False  # the last job ended within HOLD of its start: claim ahead
        self.claim_at = 0.0  # monotonic time before which no claim is tried (the queue was found short)
        self._limited_jobs: set[str] = set()  # running jobs of limited queues
        self.limited: frozenset[str] = frozenset()  # the limited queues the last claim saw (Exchanged.limited)

    def _limited(self):
        """Return the queues the last claim found limited (the store's Exchanged.limited, kept by `claimed`)."""
        return self.limited

    def claim_now(self) -> None:
        """Claim at the next turn, not at the next poll (a wake-up, a new scheduled run, a freed place)."""
        self.claim_at = 0.0

    def wanted(self, now: float, running: int, stopping: bool) -> int:
        """Return how many jobs to claim at `now` with `running` jobs running: 0 unless a slot would idle or
        the reserve is half used (while jobs are short), and not before `claim_at`."""
        if stopping or now < self.claim_at:
            return 0
        held = running + len(self.reserve)
        if held < self.slots or (self.short and len(self.reserve) <= self.prefetch // 2):
            return self.slots + (self.prefetch if self.short else 0) - held
        return 0

    def held_back(self, now: float, running: dict) -> list[Job]:
        """Return the reserve to give back at `now`: all of it when every slot is busy with a job running
        HOLD seconds or more (jobs are then long: claim no more ahead), else nothing."""
        if self.reserve and len(running) >= self.slots and all(now - p.started >= HOLD for p in running.values()):
            self.short = False
            return list(self.reserve)
        return []

    def started(self, job: Job) -> None:
        """Note that `job` started: one of a limited queue frees its place when it ends."""
        if job.queue in self._limited():
            self._limited_jobs.add(job.id)

    def ended(self, job_id: str, duration: float) -> None:
        """Note that a job ended after `duration` seconds: short jobs claim ahead; a limited one's place is free."""
        self.short = duration < HOLD
        if job_id in self._limited_jobs:  # its place in the limit is free: claim now, not at the next poll
            self._limited_jobs.discard(job_id)
            self.claim_now()

    def claimed(self, jobs: Sequence[Job], claim: int, now: float, at, poll: float,
                limited: frozenset[str] | None = None) -> None:
        """Take the `jobs` an exchange at `now` (`at`: its Instant) claimed of `claim` asked into the reserve,
        and the limited queues its claim saw (`limited`; None: no claim ran, the last one's stand).

        When it found fewer, the next claim waits `poll` seconds, or until a rate limit that
        holds a queue back frees a place, if sooner (at least RATE_WAIT_MIN seconds).
        """
        self.reserve.extend(jobs)
        self.limited = self.limited if limited is None else limited
        if claim and len(jobs) < claim:  # the queue has no more for now: claim again at the next poll ...
            wait = poll
            if self._limited():  # ... or when a rate limit that holds a queue back frees a place, if sooner
                try:
                    room_at = self.store.rate_room_at(self.queues, at)
                except DatabaseError:  # the exchange is done: this read failing only costs the poll's wait
                    room_at = None
                if room_at is not None:
                    wait = min(wait, max(RATE_WAIT_MIN, room_at - at.wall))
            self.claim_at = now + wait

    def next_due(self, now: float, running: dict, stopping: bool) -> float:
        """Return the monotonic time of the next claim or give-back (inf: none is due)."""
        due = float("inf")
        if not stopping and len(running) + len(self.reserve) < self.slots:
            due = self.claim_at
        if self.reserve and running and len(running) >= self.slots:
            due = min(due, max(p.started for p in running.values()) + HOLD)  # all busy HOLD s
        return due
