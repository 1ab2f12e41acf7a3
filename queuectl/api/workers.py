"""Workers as a front end sees them: starting one (its name and queues checked) and stopping this host's workers
(drain, or --force)."""

from __future__ import annotations

import time
from typing import Callable, Collection, Sequence
from queuectl.domain.errors import InvalidConfig, InvalidInput, QueuectlError
from queuectl.domain.jobspec import check_queue
from queuectl.domain.models import DRAIN_SAY_EVERY, JobState, printable, waiting_line
from queuectl.host.control import select_workers, stop_workers

#: Seconds a stop waits before its first line on what it waits for (a drain of idle workers says nothing).
SAY_AFTER = 1.0


def worker_for(store_for: Callable[[], object], name: str | None = None, slots: int = 1, queues: Sequence[str] = (),
               burst: bool = False, unit: str | None = None, from_environment: Collection[str] = ()):
    """Return the queuectl.worker.Worker that `worker start` runs, its store from `store_for()` once its name and
    queues are checked: `name` (None: HOST-PID; "" is refused), `queues` each a name or several separated by
    commas (empty ones left out, each named once, in order; none: every queue).

    Raises InvalidInput for a bad name or queue, or InvalidConfig when it came from the environment (a name
    of `from_environment`: "name", "queues"): a unit's setting, which a restart would not fix (exit 78, which
    the unit does not restart on). Raises what Worker and `store_for` raise (InvalidConfig, DatabaseError).
    """
    from queuectl.worker import Worker, check_name, default_name  # a command's work: `worker stop` runs none of it

    def checked(field: str, variable: str, check):
        try:
            return check()
        except InvalidInput as e:
            if field in from_environment:
                raise InvalidConfig(f"{variable}: {e}") from None
            raise

    name = checked("name", "QUEUECTL_WORKER_NAME", lambda: default_name() if name is None else check_name(name))
    queues = checked("queues", "QUEUECTL_WORKER_QUEUES",
                     lambda: tuple(dict.fromkeys(check_queue(q) for arg in queues for q in arg.split(",") if q)))
    return Worker(store_for(), name=name, slots=slots, queues=queues, burst=burst, unit=unit)


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
