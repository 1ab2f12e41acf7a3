"""The dashboard's connections to the queue: one to read, shared by every page and tab, and one to act.

The database's load does not grow with the number of open pages: one snapshot
(queuectl.api.snapshot.take) serves every request for `interval` seconds, and history reads
(queuectl.api.history.window) are kept for HISTORY_TTL seconds per span. Each connection is used by one
request thread at a time (a lock each): the store's connections are not shared between threads.

The reading connection is opened read-only where the engine allows (SQLite: mode=ro), and it is
wrapped so that only reading methods can be called through it (Reader): a viewer's request has
no path to a writing call. The acting connection is opened on the first action.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from queuectl.errors import PermissionDenied

#: Seconds a history read is kept, by span (seconds): the hour's minutes change each minute, a day's or
#: week's hours each hour.
HISTORY_TTL = {3600.0: 15.0, 86400.0: 120.0, 7 * 86400.0: 600.0}

#: The store's methods a reader may call (queuectl.store.interface.CommandStore's reads).
READS = frozenset({
    "activity", "activity_totals", "can_write", "clock", "count_jobs", "count_purgeable", "counts", "defaults",
    "dependencies", "describe", "find_jobs", "get_job", "held_keys", "jobs_by_id", "list_jobs", "now",
    "oldest_ready", "paused_queues", "queue_limits", "read_output", "run_counts", "schedules", "settings",
    "stopped_workers", "worker_by_name", "workers",
})


class Reader:
    """A store seen through its reading methods alone (READS): any other raises PermissionDenied."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name: str):
        if name not in READS:
            raise PermissionDenied(f"refused: {name} is not a read")
        return getattr(self._store, name)


class Connections:
    """The dashboard's two connections (see the module's docstring); `open_store(read_only)` opens one."""

    def __init__(self, open_store: Callable[[bool], object], interval: float, clock=time.monotonic):
        self._open = open_store
        self.interval = interval
        self._clock = clock
        self._read_lock = threading.Lock()
        self._act_lock = threading.Lock()
        self._reader: Reader | None = None
        self._actor = None
        self._snapshot: tuple[float, object] | None = None
        self._history: dict[tuple, tuple[float, object]] = {}

    def read(self, call: Callable):
        """Return `call(reader)` on the reading connection (opened on first use)."""
        with self._read_lock:
            if self._reader is None:
                self._reader = Reader(self._open(True))
            return call(self._reader)

    def act(self, call: Callable):
        """Return `call(store)` on the acting connection (opened on first use); raises what opening raises
        (PermissionDenied for a user of the database who may not write)."""
        with self._act_lock:
            if self._actor is None:
                self._actor = self._open(False)
            result = call(self._actor)
        self._snapshot = None  # the next page shows the change
        self._history.clear()
        return result

    def snapshot(self):
        """Return the shared snapshot, read again once `interval` seconds old."""
        from queuectl.api.snapshot import take

        kept = self._snapshot
        now = self._clock()
        if kept is not None and now - kept[0] < self.interval:
            return kept[1]
        snap = self.read(take)
        self._snapshot = (self._clock(), snap)
        return snap

    def window(self, span: float, step: float, by_queue: bool = False):
        """Return queuectl.api.history.window of the last `span` seconds in `step`s (the steps, and the span
        summed), read at most every HISTORY_TTL[span] seconds."""
        from queuectl.api.history import window

        key = (span, step, by_queue)
        kept = self._history.get(key)
        now = self._clock()
        if kept is not None and now - kept[0] < HISTORY_TTL.get(span, 15.0):
            return kept[1]
        result = self.read(lambda store: window(store, since=span, step=step, by_queue=by_queue))
        self._history[key] = (self._clock(), result)
        return result

    def describe(self) -> str:
        """The database as it may be shown (queuectl.store's describe: never a password)."""
        return self.read(lambda store: store.describe())

    def close(self) -> None:
        """Close both connections."""
        for store in (self._reader._store if self._reader else None, self._actor):
            if store is not None:
                store.close()
        self._reader = self._actor = None
