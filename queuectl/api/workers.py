"""Workers as a front end sees them: stopping this host's workers (drain, or --force)."""

from __future__ import annotations

from typing import Sequence


def stop(store, patience, names: Sequence[str] = (), timeout: float | None = None, force: bool = False) -> list:
    """Ask this host's running workers (all, or those named) to drain and exit, and wait for them.

    Returns queuectl.control's results, one per worker signalled (`outcome` "timeout" for one still
    running when `timeout` seconds passed); [] when none runs here. With `force`, a worker that has
    taken the first signal gets the second (its running jobs stop and go back to pending); whether
    it has is read through `patience` (while the database is unavailable: as it was).
    """
    from queuectl.control import select_workers, stop_workers

    targets = select_workers(store.workers(), names)
    if not targets:
        return []

    def draining(w) -> bool:
        now = patience.poll(lambda: store.worker_by_name(w.name), default=w)  # unknown yet: as it was
        return now is None or now.id != w.id or now.draining_since is not None

    return stop_workers(targets, timeout, force=force, draining=draining)
