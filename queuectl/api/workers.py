"""Workers as a front end sees them: stopping this host's workers (drain, or --force). Starting one is
queuectl.api.starting's, which imports the whole worker: `worker stop` runs none of it."""

from __future__ import annotations

import time
from typing import Callable, Sequence
from queuectl.domain.errors import QueuectlError
from queuectl.domain.models import DRAIN_SAY_EVERY, JobState, printable, waiting_line
from queuectl.host.control import select_workers, stop_workers

#: Seconds a stop waits before its first line on what it waits for (a drain of idle workers says nothing).
SAY_AFTER = 1.0


def stop(store, patience, names: Sequence[str] = (), timeout: float | None = None, force: bool = False,
         note: Callable[[str], None] | None = None) -> list:
    """Ask this host's running workers (all, or those named) to drain and exit, and wait for them.

    Returns queuectl.host.control's results, one per worker signalled (`outcome` "timeout" for one still
    running when `timeout` seconds passed); [] when none runs here. With `force`, a worker that has
    taken the first signal gets the second (its running jobs stop and go back to pending); whether
    it has is read through `patience` (while the database is unavailable: as it was). `note`, if
    given, gets what the wait waits for after SAY_AFTER seconds, then every DRAIN_SAY_EVERY
    (waiting_for); while the database is unavailable, no line.
    """
    targets = select_workers(store.workers(), names)
    if not targets:
        return []

    def draining(w) -> bool:
        now = patience.poll(lambda: store.worker_by_name(w.name), default=w)  # unknown yet: as it was
        return now is None or now.id != w.id or now.draining_since is not None

    return stop_workers(targets, timeout, force=force, draining=draining, watch=_sayer(store, patience, note))


def _sayer(store, patience, note: Callable[[str], None] | None):
    """The `watch` of a stop that says to `note` what it waits for (None: says nothing): see `stop`."""
    if note is None:
        return None
    next_at = time.monotonic() + SAY_AFTER

    def watch(workers) -> None:
        nonlocal next_at
        if time.monotonic() >= next_at:
            next_at = time.monotonic() + DRAIN_SAY_EVERY
            try:
                line = patience.poll(lambda: waiting_for(store, workers), default=None)
            except QueuectlError:  # the database fails (or has for too long): the stop goes on without the line
                line = None
            if line is not None:
                note(line)
    return watch


def waiting_for(store, workers) -> str:
    """Say what a stop of `workers` (WorkerInfo, still running) waits for: their running jobs and how long each
    has run (queuectl.domain.models.waiting_line), or the workers themselves when they run none (they record their
    results, or exit)."""
    ids = {w.id for w in workers}
    now = store.clock()
    running = [(j.id, max(now - j.started_at, 0.0)) for j in store.list_jobs(JobState.PROCESSING, None, 10**6)
               if j.worker_id in ids and j.started_at is not None]
    if running:
        return waiting_line(running)
    return f"waiting for {', '.join(printable(w.name) for w in workers)} to exit (no job running)"
