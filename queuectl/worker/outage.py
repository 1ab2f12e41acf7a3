"""Database outages: how a worker rides out a database that fails, and the watchdog rule.

The watchdog rule (systemd's WatchdogSec): the watchdog watches the loop. A turn of the loop
pings it after it wrote the heartbeat, or after it found the database unavailable
(DatabaseUnavailable: a PostgreSQL server that cannot be reached or whose connection was lost,
a SQLite lock held elsewhere for the whole busy timeout, a full disk). Such an outage meets
every process alike, a new incarnation included: a restart would gain nothing and would kill
the running jobs, which the loop keeps running (reading their output, enforcing timeouts,
holding their results) while it tries the database again every DB_RETRY seconds; STATUS=
says how long it has lasted. The pings stop, so that systemd restarts the worker, when the loop
stops turning (hung, frozen, or blocked in one call: a SQLite write waiting for a lock, a
connection attempt), and on any other database error, which a new process might not meet (a
connection that answers but refuses every write, as a server demoted to a standby does; a
SQLite file replaced under the open one).

After an outage every other worker gets stale-after to beat again (queuectl.host.liveness rule 2),
once per outage.
"""

from __future__ import annotations

import logging
from typing import Callable

from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable, InvalidInput

log = logging.getLogger("queuectl.worker")

#: Seconds between tries of the database after it failed (locked, full, failing).
DB_RETRY = 1.0


class Outage:
    """One worker's view of its database's failures: since when it fails, when to try again, what is in doubt.

    `notifier` is pinged for the watchdog (queuectl.host.notify.Notifier); `watch` is the worker's
    liveness.Watch of the others (given their grace); `monotonic` gives CLOCK_MONOTONIC seconds.
    """

    def __init__(self, notifier, watch, monotonic: Callable[[], float]):
        self.notifier = notifier
        self.watch = watch
        self.monotonic = monotonic
        self.failing_since: float | None = None  # monotonic time of the first failed write of an outage
        self.retry_at: float | None = None  # no database work before this (monotonic)
        self.in_doubt = False  # an exchange or another database operation failed: settle what the store holds
        self.unregistered_stop = False  # stopped while the database failed: the registration stays
        self._grace_given = False  # the other workers got their grace after this outage (grant_grace)
        self._error_logged = (None, 0.0)  # (message, monotonic time) of the last one logged

    def waiting(self, now: float) -> float | None:
        """Return the seconds left before the database is tried again at monotonic `now`, or None: try it now."""
        if self.retry_at is not None and now < self.retry_at:
            return self.retry_at - now
        self.retry_at = None
        return None

    def failed(self, error: DatabaseError | InvalidInput, held: int) -> None:
        """Note a failed database operation (`held`: jobs running and results held).

        Logs it when it is new, then at most every 30 s; pings the watchdog if the database is
        unavailable: the loop lives (the module's watchdog rule).
        """
        mono = self.monotonic()
        self.in_doubt = True  # whatever failed, the database may come back as another (a failover): settle
        if self.failing_since is None:
            self.failing_since, self._grace_given = mono, False
        if isinstance(error, DatabaseUnavailable):
            self.notifier.watchdog()
        message, logged_at = self._error_logged
        if str(error) != message or mono - logged_at >= 30:
            log.error("%s; keeping %d job(s) and their results, retrying every %g s", error, held, DB_RETRY)
            self._error_logged = (str(error), mono)

    def retry_later(self) -> float:
        """Try the database again DB_RETRY seconds from now; return DB_RETRY."""
        self.retry_at = self.monotonic() + DB_RETRY
        return DB_RETRY

    def beat(self, now: Instant) -> None:
        """A heartbeat was written at `now`: during an outage, the other workers get their grace first."""
        if self.failing_since is not None:
            self.grant_grace(now)  # before the watch: after an outage, every other worker gets its grace

    def works(self, now: Callable[[], Instant]) -> None:
        """After an outage (once a whole turn of the loop succeeded): say so, and give every other
        worker stale-after to beat again (queuectl.host.liveness rule 2). `now` reads the worker's clocks."""
        if self.failing_since is None:
            return
        at = now()
        log.warning("the database takes writes again after %.1f s", at.mono - self.failing_since)
        self.grant_grace(at)
        self.failing_since = None
        self._error_logged = (None, 0.0)

    def grant_grace(self, now: Instant) -> None:
        """Give every other worker stale-after from `now` to beat again, once per outage."""
        if not self._grace_given:
            self.watch.writes_resumed(now)
            self._grace_given = True

    def stop_unregistered(self, name: str, summary: str) -> None:
        """Stop (asked to) while the database fails, with nothing running or held: waiting for it
        would only hold the stop up, maybe for systemd's whole TimeoutStopSec. The registration is
        left behind; the next worker of this host to look finds its process gone and removes it."""
        log.warning("worker %s stopped while the database fails; its registration is left for a worker of"
                    " this host to remove: %s", name, summary)
        self.unregistered_stop = True

    def status(self, running: int, held: int) -> str:
        """Return the head of STATUS= during an outage (`running` jobs, `held` results)."""
        return (f"database unavailable for {self.monotonic() - self.failing_since:.0f} s; {running}"
                f" job(s) running and {held} result(s) held")
