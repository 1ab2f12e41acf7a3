"""Wake-up sources: what ends the loop's wait early besides a job's end or output.

Three sources sit in the runner's select(): the stop signals' self-pipe (queuectl.host.signals), the
worker's wake-up socket that `queuectl enqueue` and `cancel` poke (queuectl.host.wake), and the
store's own source, if any (PostgreSQL's LISTEN). A wake-up makes the worker look for cancels
and claim at once.
"""

from __future__ import annotations

from queuectl.host.signals import drain
from queuectl.host.wake import listen as listen_for_pokes


class Wakeups:
    """The wake-up sources of one worker, kept in its runner's select()."""

    def __init__(self, store, runner):
        self.store = store
        self.runner = runner
        self.poke = None  # the wake-up socket (queuectl.host.wake)
        self.source = None  # the store's wake-up source (PostgreSQL's LISTEN), if any
        self._source_fd = None

    def open(self, wake, pid: int) -> None:
        """Add the stop signals' pipe `wake` and the wake-up socket of process `pid` to the select()."""
        self.runner.add_wake_fd(wake.fileno())
        self.poke = listen_for_pokes(pid)
        if self.poke is not None:
            self.runner.add_wake_fd(self.poke.fileno())

    def close(self) -> None:
        """Close the wake-up socket."""
        if self.poke is not None:
            self.poke.close()

    def listen(self) -> None:
        """Keep the store's wake-up source in the runner's select(): opened again after it broke.

        A broken source leaves the selector before the store closes or replaces it: libpq may
        have closed its socket already, and a job's pipe started next could get the same fd
        number (a selector that still held it would refuse the pipe).
        """
        if self.source is not None and self.source.broken:
            self._drop()
        if self.source is not None:
            return
        source = self.store.wakeup_source()
        if source is not None:
            self.source, self._source_fd = source, source.fileno()
            self.runner.add_wake_fd(self._source_fd)

    def take(self, wake) -> None:
        """Drain what woke the loop: the signals' pipe `wake`, pokes and the store's notifications."""
        drain(wake)
        if self.poke is not None:
            drain(self.poke)
        if self.source is not None:
            self.source.take()
            if self.source.broken:  # out of the selector before any new fd can reuse its number
                self._drop()

    def _drop(self) -> None:
        """Take the broken wake-up source out of the selector (the store closes it when it opens the next)."""
        self.runner.remove_wake_fd(self._source_fd)
        self.source = None
