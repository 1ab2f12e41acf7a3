"""Stop running workers from another process (`queuectl worker stop`)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from queuectl.host import liveness, procs, units
from queuectl.domain.clock import Instant
from queuectl.domain.errors import NotFound, PermissionDenied
from queuectl.domain.models import WorkerInfo


@dataclass(frozen=True)
class StopResult:
    """What happened to one worker: 'stopped', 'timeout' (still draining) or 'not running'."""

    name: str
    pid: int
    outcome: str


def select_workers(workers: Sequence[WorkerInfo], names: Sequence[str]) -> list[WorkerInfo]:
    """Return the workers on this host (all, or those named); raises NotFound for an unknown name."""
    local = [w for w in workers if w.host == procs.hostname()]
    if not names:
        return local
    by_name = {w.name: w for w in workers}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise NotFound(f"no registered worker named {', '.join(repr(n) for n in missing)}")
    elsewhere = [n for n in names if by_name[n].host != procs.hostname()]
    if elsewhere:
        raise NotFound(f"worker {elsewhere[0]!r} runs on host {by_name[elsewhere[0]].host}, not here")
    return [by_name[n] for n in names]


def worker_state(w: WorkerInfo, now: Instant, stale_after: float) -> str:
    """Judge a registered worker: 'running', 'draining', 'stale' (no heartbeat for stale_after s) or 'dead'.

    'dead' needs the worker to be on this host with its process gone; a worker elsewhere
    is judged by its heartbeat alone (queuectl.host.liveness.heartbeat_age). Stale and dead
    workers' jobs are recovered by any live worker.
    """
    if liveness.owner_alive(w) is False:
        return "dead"
    if liveness.heartbeat_age(w, now) > stale_after:
        return "stale"
    return "draining" if w.draining_since is not None else "running"


def stop_workers(workers: Sequence[WorkerInfo], timeout: float | None, force: bool = False,
                 draining: Callable[[WorkerInfo], bool] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 watch: Callable[[list[WorkerInfo]], None] | None = None) -> list[StopResult]:
    """Ask each worker to drain and wait up to `timeout` seconds (None: forever) for all to exit.

    A worker that runs under a systemd unit is stopped through `systemctl stop`, so
    systemd knows the stop was asked for and does not restart it; it is done when the
    unit is inactive. Any other worker gets SIGTERM, and only if its pid and start time
    match the registration, so a recycled pid is never hit. A worker already draining is
    not signalled again (a second signal would stop its jobs) unless `force`, which sends
    exactly that second signal: running jobs are stopped and put back to pending. A worker
    not yet draining gets the second signal once `draining(worker)` says the first has
    been taken (two signals that arrive together count as one). `watch`, if given, is called
    with the workers still running at each look (every 0.1 s). Raises QueuectlError if
    systemctl refuses (for example without root), PermissionDenied if a worker belongs
    to another user.
    """
    under_systemd = units.systemd_booted()
    live, results = [], []
    by_unit = [w for w in workers if w.unit and under_systemd]
    units.stop([w.unit for w in by_unit])
    if force:
        units.kill([w.unit for w in by_unit if w.draining_since is not None], signal.SIGTERM)
    live += [(w, lambda w=w: units.is_stopped(w.unit)) for w in by_unit]
    for w in workers:
        if w in by_unit:
            continue
        if liveness.owner_alive(w):
            try:
                if w.draining_since is None or force:
                    os.kill(w.pid, signal.SIGTERM)
                live.append((w, lambda w=w: not procs.process_alive(w.pid, w.pid_start)))
                continue
            except ProcessLookupError:
                pass
            except PermissionError:
                raise PermissionDenied(f"cannot signal worker {w.name!r} (pid {w.pid}): run this as its user"
                                       " or as root") from None
        results.append(StopResult(w.name, w.pid, "not running"))
    if force:
        _second_signal([w for w, _ in live if w.draining_since is None], draining, sleep, under_systemd)
    deadline = None if timeout is None else time.monotonic() + timeout
    while live:
        done = [(w, gone) for w, gone in live if gone()]
        results += [StopResult(w.name, w.pid, "stopped") for w, _ in done]
        live = [item for item in live if item not in done]
        if live and deadline is not None and time.monotonic() >= deadline:
            results += [StopResult(w.name, w.pid, "timeout") for w, _ in live]
            break
        if live:
            if watch is not None:
                watch([w for w, _ in live])
            sleep(0.1)
    return results


def _second_signal(workers: Sequence[WorkerInfo], draining, sleep, under_systemd: bool) -> None:
    """Send the forcing second SIGTERM to workers that have just been asked to drain."""
    for w in workers:
        for _ in range(200):  # up to 10 s for the worker to take the first signal
            if draining is None or draining(w):
                break
            sleep(0.05)
        if w.unit and under_systemd:
            units.kill([w.unit], signal.SIGTERM)
        elif procs.process_alive(w.pid, w.pid_start):
            try:
                os.kill(w.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
