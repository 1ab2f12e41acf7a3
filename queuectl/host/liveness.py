"""Judge whether registered workers are alive, on clocks that no wall-clock step can fool.

The rules, in the order they apply:
1. Dead now: a worker that registered from this host, boot and PID namespace whose process
   is gone (its pid no longer runs, or names a process with another start time).
2. Stale: no sign of life for `stale-after` seconds, measured on a monotonic clock only.
   For a worker of this clock domain (this boot: see queuectl.domain.clock) that is its last
   heartbeat on the monotonic clock that both share. For a worker of another domain
   (another host, or a container that sees another boot id) it is the moment this
   watcher saw its heartbeat count change, on the watcher's own monotonic clock: neither
   host's wall clock is trusted, so a step or a skew between hosts cannot make a live
   worker look dead. A watcher that could not write to the database lets every worker
   `stale-after` seconds from the moment its own writes came back: an outage (a full
   disk, a lock held too long) silences every worker's heartbeats at once.
3. Otherwise alive. A frozen worker (SIGSTOP, a hung loop) stops beating and so is found
   stale, as is a host that went away.

`queuectl status` has no history to watch, so for a worker of another clock domain it
shows the heartbeat's age on the store's wall clock: on SQLite that assumes the clocks of
the hosts (containers) sharing the file agree; on PostgreSQL it is the server's clock.
"""

from __future__ import annotations

from queuectl.host import procs
from queuectl.domain.clock import Instant
from queuectl.domain.models import WorkerInfo

DEAD, STALE, SUSPECT, ALIVE = "dead", "stale", "suspect", "alive"


def owner_alive(w: WorkerInfo) -> bool | None:
    """Return whether the worker's process lives; None if this process cannot tell (another host or namespace)."""
    return procs.owner_alive(w.host, w.boot_id, w.pid, w.pid_start, w.pid_ns)


def same_clock(w: WorkerInfo, now: Instant) -> bool:
    """Return True if `w`'s heartbeat_mono and `now.mono` read one monotonic clock (a known, equal domain)."""
    return bool(now.domain) and now.mono is not None and w.heartbeat_mono is not None and w.clock_domain == now.domain


def heartbeat_age(w: WorkerInfo, now: Instant) -> float:
    """Return the seconds since `w`'s last heartbeat at `now`.

    On the monotonic clock when `w` beat in `now`'s clock domain; otherwise on the wall
    clock, which assumes that the two hosts' clocks agree.
    """
    if same_clock(w, now):
        return now.mono - w.heartbeat_mono
    return now.wall - w.heartbeat_at


class Watch:
    """One worker's running judgement of the others (the module's rules 1 to 3).

    Every `now` it is given must carry this process's monotonic reading (`Instant.mono`).
    """

    def __init__(self):
        self._seen: dict[int, tuple[tuple, float, bool]] = {}  # id -> (WorkerInfo.seen, when first seen, changed)
        self._dead: dict[int, float] = {}  # id -> when first found dead (monotonic)
        self._trusted_from = float("-inf")

    def writes_resumed(self, now: Instant) -> None:
        """Record that this worker could not watch for a while (its writes failed, or it was held up).

        Every other worker then gets stale-after from `now` to show a sign of life.
        """
        self._trusted_from = now.mono

    def verdict(self, w: WorkerInfo, now: Instant, stale_after: float) -> str:
        """Return DEAD, STALE, ALIVE, or SUSPECT: old by its recorded heartbeat but not yet silent long enough here.

        `now` must carry this process's monotonic reading. A SUSPECT worker may turn out
        stale later; its jobs are not recovered yet.
        """
        if owner_alive(w) is False:
            self._dead.setdefault(w.id, now.mono)
            return DEAD
        mono = now.mono
        seen, first_seen, changed = self._seen.get(w.id, (w.seen, mono, False))
        if seen != w.seen:
            first_seen, changed = mono, True
        self._seen[w.id] = (w.seen, first_seen, changed)
        same_domain = same_clock(w, now)
        last_sign = w.heartbeat_mono if same_domain else first_seen
        if mono - max(last_sign, self._trusted_from) > stale_after:
            return STALE
        if (same_domain or not changed) and heartbeat_age(w, now) > stale_after:
            return SUSPECT
        return ALIVE

    def dead_for(self, worker_id: int, now: Instant) -> float:
        """Seconds since this watcher first found the worker dead (0 if it never did)."""
        return now.mono - self._dead.get(worker_id, now.mono)

    def forget_others(self, worker_ids) -> None:
        """Drop what is remembered of workers not in `worker_ids` (deregistered or recovered)."""
        keep = set(worker_ids)
        self._seen = {k: v for k, v in self._seen.items() if k in keep}
        self._dead = {k: v for k, v in self._dead.items() if k in keep}
