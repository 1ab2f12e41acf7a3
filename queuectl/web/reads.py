"""The dashboard's connections to the queue: one to read, shared by every page and tab, and one to act.

The database's load does not grow with the number of open pages: one snapshot
(queuectl.api.snapshot.take) serves every request for `interval` seconds, and history reads
(queuectl.api.history.window) are kept for HISTORY_TTL seconds per span, and this host's worker units
are asked of systemd at most every queuectl.api.units.EVERY seconds (queuectl.api.units.Units). Each connection is used by one
request thread at a time (a lock each): the store's connections are not shared between threads.

The reading connection is opened read-only where the engine allows (SQLite: mode=ro), and it is
wrapped so that only reading methods can be called through it (Reader): a viewer's request has
no path to a writing call. The acting connection is opened on the first action.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from typing import Callable

from queuectl.domain.errors import PermissionDenied
from queuectl.api.history import window
from queuectl.api.snapshot import take
from queuectl.api.units import Units

#: Seconds a history read is kept, by span (seconds): the hour's minutes change each minute, a day's or
#: week's hours each hour, though their newest hour is the one the hour's chart shows, so not for long
#: (a week is about 1,600 rows a queue since the rollup: docs/web.md, "The load on the database").
HISTORY_TTL = {3600.0: 15.0, 86400.0: 60.0, 7 * 86400.0: 120.0}

#: What an action leaves kept (by the first part of its key): the history's past steps (an action changes
#: what follows them only, and a kept span is read again within HISTORY_TTL anyway) and the database's name.
KEPT_THROUGH_ACTIONS = frozenset({"window", "describe"})

#: The store's methods a reader may call (queuectl.store.interface.CommandStore's reads).
READS = frozenset({
    "activity", "activity_totals", "can_write", "clock", "count_jobs", "count_purgeable", "counts", "defaults",
    "dependencies", "describe", "find_jobs", "get_job", "held_keys", "job_attempts", "jobs_by_id", "list_jobs", "now",
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
    """The dashboard's two connections (see the module's docstring); `open_store(read_only)` opens one; `units`:
    the worker units' reader (a queuectl.api.units.Units, made if not given).

    `reads` counts the reads on the reading connection by kind: "snapshot" (queuectl.api.snapshot.take),
    "history" (a span's history) and "page" (any other: a list, a job); `summary()` says them (the database's
    name, "describe", is no statement and not said).
    """

    def __init__(self, open_store: Callable[[bool], object], interval: float, clock=time.monotonic, units=None):
        self._open = open_store
        self.interval = interval
        self._clock = clock
        self._started = clock()
        self._read_lock = threading.Lock()
        self._act_lock = threading.Lock()
        self._reader: Reader | None = None
        self._actor = None
        self._kept: dict[tuple, tuple[float, object]] = {}
        self.reads: collections.Counter = collections.Counter()
        self._units = units or Units(clock=clock)

    def read(self, call: Callable, kind: str = "page"):
        """Return `call(reader)` on the reading connection (opened on first use), counting it as a `kind` read."""
        with self._read_lock:
            return self._read(call, kind)

    def _read(self, call: Callable, kind: str):
        if self._reader is None:
            self._reader = Reader(self._open(True))
        self.reads[kind] += 1
        return call(self._reader)

    def kept(self, key: tuple, call: Callable, ttl: float | None = None, kind: str = "page"):
        """Return `call(reader)`, read at most every `ttl` seconds (default: the interval) for every request that
        asks by `key`: requests that arrive together while it is read wait for that one reading."""
        ttl = self.interval if ttl is None else ttl
        kept = self._kept.get(key)
        if kept is not None and self._clock() - kept[0] < ttl:
            return kept[1]
        with self._read_lock:
            kept = self._kept.get(key)  # read by the request this one waited for
            if kept is not None and self._clock() - kept[0] < ttl:
                return kept[1]
            value = self._read(call, kind)
            self._kept[key] = (self._clock(), value)
            return value

    def act(self, call: Callable):
        """Return `call(store)` on the acting connection (opened on first use); raises what opening raises
        (PermissionDenied for a user of the database who may not write)."""
        with self._act_lock:
            if self._actor is None:
                self._actor = self._open(False)
            result = call(self._actor)
        with self._read_lock:  # the next page shows the change; history already kept is not changed by it
            for key in [key for key in self._kept if key[0] not in KEPT_THROUGH_ACTIONS]:
                del self._kept[key]
        return result

    def snapshot(self):
        """Return the shared snapshot, read again once `interval` seconds old."""
        return self.kept(("snapshot",), take, kind="snapshot")

    def units(self, snap) -> dict:
        """Return {worker id: queuectl.api.units.UnitState} of the snapshot's workers under a unit on this host,
        systemd asked at most every queuectl.api.units.EVERY seconds whatever the number of pages."""
        return self._units.of(snap.workers)

    def window(self, span: float, step: float, by_queue: bool = False):
        """Return queuectl.api.history.window of the last `span` seconds in `step`s (the steps, and the span
        summed), read at most every HISTORY_TTL[span] seconds."""
        return self.kept(("window", span, step, by_queue),
                         lambda store: window(store, since=span, step=step, by_queue=by_queue),
                         HISTORY_TTL.get(span, 15.0), "history")

    def summary(self) -> str:
        """Say how often the queue was read since start, by kind (the load the pages put on the database)."""
        r = self.reads
        return (f"read the queue {r['snapshot'] + r['history'] + r['page']} times in {self._clock() - self._started:.0f} s:"
                f" {r['snapshot']} snapshots (at most one every {self.interval:g} s), {r['history']} history"
                f" spans, {r['page']} page reads")

    def describe(self) -> str:
        """The database as it may be shown (queuectl.store's describe: never a password; no statement)."""
        return self.kept(("describe",), lambda store: store.describe(), math.inf, "describe")

    def close(self) -> None:
        """Close both connections."""
        for store in (self._reader._store if self._reader else None, self._actor):
            if store is not None:
                store.close()
        self._reader = self._actor = None
