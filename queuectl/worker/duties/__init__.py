"""The worker's duties besides running jobs, behind one contract.

A duty has `due(now)`, True when it is to run at monotonic `now` (CLOCK_MONOTONIC seconds),
`run(now)`, which does it and returns what it did (and raises DatabaseError, which the loop rides
out as for any write), and `wake_at()`, the monotonic time by which the loop must turn for it (inf:
the loop's other timers suffice). Each takes what it uses, not the Worker: the store, the parts it
acts on (runner, claim policy, drain, stats), and as callables what the Worker changes under it: the
registered worker's id (set at registration), the settings in force (reloaded at each heartbeat) and
the worker's clocks. The Worker wires them and runs them in lists, in order (queuectl.worker.loop):
- at each heartbeat: recovery of lost workers' jobs (recovery.RecoveryDuty: how many it recovered);
- before each exchange: cancels (cancels.Cancels: the jobs stopped and given back), whose give-backs
  the exchange records;
- after it, unless the worker drains: retention (retention.Retention: how many jobs it deleted),
  then schedules (schedules.Schedules: the slots it fired).
"""

from __future__ import annotations

from typing import Iterable, Protocol


class Duty(Protocol):
    """What the loop asks of a duty (the module's contract)."""

    def due(self, now: float) -> bool: ...

    def run(self, now: float) -> object: ...

    def wake_at(self) -> float: ...


def run_due(duties: Iterable[Duty], now: float) -> None:
    """Run, in order, each of `duties` that is due at monotonic `now`."""
    for duty in duties:
        if duty.due(now):
            duty.run(now)


def wake_at(duties: Iterable[Duty]) -> float:
    """Return the earliest monotonic time by which one of `duties` needs the loop to turn (inf: none)."""
    return min((duty.wake_at() for duty in duties), default=float("inf"))
