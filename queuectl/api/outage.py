"""Riding out a database outage while waiting: the one loop that every waiting command reads through.

`wait`, `logs --follow`, `enqueue --wait` and `--follow`, `cancel --wait` and `worker stop --force`
read the store every fraction of a second until what they wait for has happened. A read that
meets DatabaseUnavailable (a PostgreSQL server restarting, stopped or failing over, whose
connection the store opens again at a later call, at most once per back-off period:
queuectl.store.postgres.RECONNECT_MIN to RECONNECT_MAX; a SQLite file locked by another process
for the whole busy timeout) is tried again every RETRY seconds, as workers ride out an outage
(queuectl.worker, the watchdog rule). The waiter says so in one line (`note`) when the outage
begins and in one when the database answers again. What it has read so far (the jobs' states,
a follower's attempt and byte positions) stays with the caller, so it goes on where it was:
nothing is lost or printed twice, and it exits as it would have without the outage.

It gives up when the outage has lasted LIMIT seconds (QUEUECTL_OUTAGE_LIMIT sets another), or
when the caller's own deadline (`--timeout`) comes first during one: DatabaseUnavailable, which
the command line reports in one line with exit 1. The jobs go on meanwhile; the waiter only
cannot tell how they are doing.

Only waiting is ridden out. A command that cannot open the database, and a write (the enqueue
of `enqueue --wait`, the request of `cancel`), fail at once, in one line, as every command does:
a write whose reply was lost may have been committed, and a typo in a URI should not cost
minutes. Any error other than DatabaseUnavailable ends the wait at once.
"""

from __future__ import annotations

import os
import time
from typing import Callable, TypeVar

from queuectl.domain.errors import DatabaseUnavailable, InvalidConfig, InvalidInput
from queuectl.domain.settings import parse_duration

T = TypeVar("T")

#: Seconds a waiter rides out an unavailable database before it gives up. A restart is over in
#: seconds and an automatic failover (Patroni's 30 s TTL, a promotion) within a minute; a reboot
#: of the database host takes a few. Five minutes carries `enqueue --wait ... && ./deploy` across
#: all of those, while a database that stays away fails the script within minutes, not never.
LIMIT = 300.0
#: The environment variable that sets another limit: seconds or a duration (90s, 5m, 1h; 0: give up at once).
LIMIT_ENV = "QUEUECTL_OUTAGE_LIMIT"
#: Seconds between reads while the database is unavailable (the store itself tries a new
#: connection at most every RECONNECT_MIN to RECONNECT_MAX seconds; a read in between fails at once).
RETRY = 0.5


def limit_text() -> str:
    """Return the default outage limit as help text says it: "5 minutes (QUEUECTL_OUTAGE_LIMIT)"."""
    return f"{LIMIT / 60:g} minutes ({LIMIT_ENV})"


def limit_from_environment(environ=os.environ) -> float:
    """Return the outage limit in seconds: QUEUECTL_OUTAGE_LIMIT if set and not empty, else LIMIT.

    Raises InvalidConfig (exit 78) for a value that is not a number of seconds or a duration.
    """
    raw = environ.get(LIMIT_ENV, "")
    if not raw.strip():
        return LIMIT
    try:
        seconds = parse_duration(raw, LIMIT_ENV, forever=False)
    except InvalidInput as e:
        raise InvalidConfig(str(e)) from None
    if seconds is None:
        raise InvalidConfig(f"{LIMIT_ENV} must be a number of seconds or a duration such as 90s or 5m (a waiter"
                            f" gives up in the end), got {raw!r}")
    return seconds


class Patience:
    """How one waiting command rides out database outages: `read` and `poll` wrap each of its reads.

    `note` gets the lines for the user (without a prefix): one when an outage begins, one when
    it ends. `limit`: seconds an outage may last before the waiter gives up (default: from the
    environment, see limit_from_environment, which raises InvalidConfig for a bad value).
    `clock` is monotonic seconds; `sleep` sleeps seconds.
    """

    def __init__(self, note: Callable[[str], None], limit: float | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.note = note
        self.limit = limit_from_environment() if limit is None else limit
        self.clock = clock
        self.sleep = sleep
        self._since: float | None = None  # when the outage under way began (clock), None between outages

    def read(self, call: Callable[[], T], deadline: float | None = None) -> T:
        """Return `call()`, calling it again every RETRY seconds while it raises DatabaseUnavailable.

        `deadline`: the caller's own end (a `clock()` value; None: none). Raises
        DatabaseUnavailable, saying for how long and why, once the outage has lasted `limit`
        seconds or the deadline has passed during it; any other exception of `call` at once.
        """
        while True:
            try:
                value = call()
            except DatabaseUnavailable as error:
                self.sleep(self._failed(error, deadline))
                continue
            self._answered()
            return value

    def poll(self, call: Callable[[], T], default: T, deadline: float | None = None) -> T:
        """Return `call()`, or `default` while the database is unavailable: one try, no sleep.

        For a caller that has something else to do meanwhile (a stop that signals workers
        whatever the database says): the outage is noted and bounded as in `read`, which
        raises DatabaseUnavailable when it has lasted too long.
        """
        try:
            value = call()
        except DatabaseUnavailable as error:
            self._failed(error, deadline)
            return default
        self._answered()
        return value

    def _answered(self) -> None:
        """The database answered: say so if it was unavailable."""
        if self._since is not None:
            self.note(f"the database is back after {self.clock() - self._since:.1f} s; waiting on")
            self._since = None

    def _failed(self, error: DatabaseUnavailable, deadline: float | None) -> float:
        """Note an unavailable database; return seconds to the next try, or raise DatabaseUnavailable
        when the outage has lasted `limit` seconds or `deadline` has passed."""
        now = self.clock()
        if self._since is None:
            self._since = now
            self.note(f"database unavailable ({error}); waiting for it"
                      f" (gives up after {max(0.0, self._give_up_at(deadline) - now):.0f} s)")
        left = self._give_up_at(deadline) - now
        if left <= 0:
            why = ("when the time to wait ran out" if deadline is not None and deadline < self._since + self.limit
                   else f"({LIMIT_ENV} {self.limit:g} s)")
            raise DatabaseUnavailable(f"gave up waiting: the database has been unavailable for"
                                      f" {now - self._since:.1f} s {why}: {error}") from None
        return min(RETRY, left)

    def _give_up_at(self, deadline: float | None) -> float:
        """When (clock) the waiter gives up on the outage under way: `limit` after it began, or `deadline`."""
        end = self._since + self.limit
        return end if deadline is None else min(end, deadline)
