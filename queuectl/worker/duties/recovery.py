"""The worker's duty of recovery: give back the jobs of workers that died or went silent, and never run a job twice.

Every worker watches the others at each of its heartbeats (`Recovery.sweep`), judging each
by queuectl.host.liveness:
- a dead worker of this host (its process gone) is recovered by any worker of this host,
  which alone can kill what is left of its jobs;
- a stale worker (silent for stale-after on a monotonic clock) by the holder of the
  "recovery" lease, one worker at a time (every worker watches, so another takes over at
  once when the holder goes);
- a suspect worker (old by its recorded heartbeat, not yet silent long enough here) keeps
  its jobs for now.
Before a lost worker's jobs are given back, what is left of them on this host is killed, so
that two copies of a job never run at once: their process groups, if still the recorded
ones; a group never recorded is found by the QUEUECTL_JOB_ID, QUEUECTL_WORKER_ID and
QUEUECTL_WORKER_PID in its processes' environment (the lost worker's: a copy that another
worker started since is never taken for its leftover, nor a job of the same id that a worker
of the same number runs for another database on this host). A worker whose leftovers cannot all be killed from here keeps
its jobs. A dead worker's groups never recorded are looked for only once it has been dead
SPAWN_SETTLE seconds: a job started in the instant its worker died may still be in exec(2),
its environment not yet readable (proc(5): /proc/PID/environ reads empty until the kernel
has set up the new program, and a child not yet exec'd shows its parent's). The store's
`recover` checks, in its transaction, that the worker did not beat since it was judged. A
recovered job counts a failed attempt ("worker lost") and follows the retry/DLQ rule, its
start recorded or not (it may have run), unless it was to run its last attempt and its start
was not recorded: a worker records that start before it runs it, so the job goes back to
pending uncounted (queuectl.domain.backoff.last_attempt).

A worker starting under the name of a dead predecessor recovers its jobs at once
(`Recovery.predecessor`), and refuses to start while a live worker has the name.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from queuectl.host import liveness, procs
from queuectl.domain.clock import Instant
from queuectl.domain.errors import Conflict
from queuectl.domain.models import JobState, WorkerInfo
from queuectl.store import JobProcess
from queuectl.store.interface import WorkerStore
from queuectl.worker.health import Stats

log = logging.getLogger("queuectl.worker")

#: Seconds a dead worker's unrecorded process groups are given to finish their exec(2) before a
#: recovery looks for them by their environment: far beyond the microseconds an exec takes, even
#: on a loaded machine.
SPAWN_SETTLE = 0.5


@dataclass
class Recovery:
    """One worker's watch over the others: `sweep` at each heartbeat, `predecessor` at registration.

    `queues` are the watching worker's (empty: every queue), for `held`: how many jobs of
    those queues were left held by lost or suspect workers at the last sweep (a --burst
    worker waits for them).
    """

    store: WorkerStore
    queues: Sequence[str] = ()
    watch: liveness.Watch = field(default_factory=liveness.Watch)
    held: int = 0
    recovered: int = 0  # jobs this worker recovered, in all

    def predecessor(self, name: str, now: Instant, stale_after: float) -> WorkerInfo | None:
        """Return the dead registration of a worker called `name`, its leftovers killed; None if there is none.

        Raises Conflict if a live worker has the name, or if the predecessor left jobs
        running that this user cannot kill.
        """
        previous = self.store.worker_by_name(name)
        if previous is None:
            return None
        alive = liveness.owner_alive(previous)
        if alive is None:  # another host: only its heartbeat can tell
            alive = liveness.heartbeat_age(previous, now) < stale_after
        if alive:
            hint = "" if previous.host == procs.hostname() else (
                "; workers on several hosts need names of their own, such as queuectl-worker@HOST-1")
            raise Conflict(f"a worker named {name!r} is already running (pid {previous.pid} on"
                           f" {previous.host}){hint}")
        jobs = self.store.worker_jobs(previous.id)
        if any(_found_by_environment(j) for j in jobs):
            time.sleep(SPAWN_SETTLE)  # when it died is not known: as long as a sweep would wait
        if not kill_local(jobs):
            raise Conflict(f"the previous worker named {name!r} left jobs running that this user cannot"
                           " kill; start it as that user")
        return previous

    def sweep(self, worker_id: int, now: Instant, config: dict) -> None:
        """Recover the jobs of workers that are dead or stale, and of none (the module's rules).

        `now` must carry this process's monotonic reading; `config` is the settings in force.
        """
        stale_after = config["stale-after"]
        held, leads = 0, None
        others = [w for w in self.store.workers() if w.id != worker_id]
        self.watch.forget_others(w.id for w in others)
        for w in others:
            verdict = self.watch.verdict(w, now, stale_after)
            if verdict == liveness.ALIVE:
                continue
            if verdict == liveness.STALE and leads is None:
                leads = self.store.take_lease("recovery", worker_id, now, stale_after)
            jobs = self.store.worker_jobs(w.id)
            settling = verdict == liveness.DEAD and self.watch.dead_for(w.id, now) < SPAWN_SETTLE and any(
                _found_by_environment(j) for j in jobs)
            if verdict == liveness.SUSPECT or (verdict == liveness.STALE and not leads) or settling \
                    or not kill_local(jobs):
                held += sum(1 for j in jobs if not self.queues or j.queue in self.queues)
                continue
            whose = f"{'dead' if verdict == liveness.DEAD else 'stale'} worker {w.name!r}"
            self.report(self.store.recover(w.id, w.seen, now, config), whose)
        if self.store.orphaned_jobs():
            self.report(self.store.recover(None, None, now, config), "no registered worker")
        self.held = held

    def report(self, recovered: Sequence[tuple[str, JobState]], whose: str) -> None:
        """Log each recovered (job id, new state) and count it."""
        for job_id, state in recovered:
            self.recovered += 1
            outcome = "retry scheduled" if state == JobState.FAILED else state.value  # "failed" would say it twice
            log.warning("recovered job %s from %s (worker lost): %s", job_id, whose, outcome)


class RecoveryDuty:
    """The recovery duty: a sweep of the other workers at each of this worker's heartbeats.

    It takes what it uses: `recovery`, this worker's watch over the others; `worker_id`, the registered
    worker's id (a callable, read at each sweep); `settings`, the settings in force (a callable: the worker
    reloads them at each heartbeat); `now`, the worker's clocks (a queuectl.domain.clock.Instant); and the
    stats whose `recovered` it keeps up to date.
    """

    def __init__(self, recovery: Recovery, worker_id: Callable[[], int], settings: Callable[[], dict],
                 now: Callable[[], Instant], stats: Stats):
        self.recovery, self.worker_id, self.settings, self.now, self.stats = recovery, worker_id, settings, now, stats

    def due(self, now: float) -> bool:
        """Return True: the loop runs this duty at each heartbeat, and only then."""
        return True

    def run(self, now: float) -> int:
        """Sweep (Recovery.sweep) at the worker's clocks now (`now`, the loop's monotonic reading, is not used)
        and count what was recovered in the stats; return how many jobs this sweep recovered.

        Raises DatabaseError if the sweep fails: the jobs it recovered before the error are counted in the stats
        by the next sweep.
        """
        before = self.recovery.recovered
        self.recovery.sweep(self.worker_id(), self.now(), self.settings())
        self.stats.recovered = self.recovery.recovered
        return self.recovery.recovered - before

    def wake_at(self) -> float:
        """Return inf: the heartbeat's timer turns the loop for it."""
        return float("inf")


def _here(j: JobProcess) -> bool:
    """True if the job's worker ran on this host (boot and PID namespace): its leftovers are ours to kill."""
    return j.host is not None and procs.is_local(j.host, j.boot_id, j.pid_ns)


def _found_by_environment(j: JobProcess) -> bool:
    """True if a recovery would look for the job's processes on this host by their environment."""
    return not j.pgid and _here(j)


def _held(job_id: str, why: str) -> bool:
    """Log why a lost worker's jobs are not recovered now; return False (for kill_local)."""
    log.error("not recovering job %s and its worker's other jobs yet: %s", job_id, why)
    return False


def kill_local(jobs: Sequence[JobProcess]) -> bool:
    """Kill what is left on this host of a lost worker's jobs, and wait until it is gone.

    Returns False, having killed nothing, if a leftover group may belong to another user
    (kill(2) refuses it, or the worker was another user's and a group was never
    recorded), and False if a group outlives its SIGKILL: the jobs then stay held
    rather than run twice.
    """
    groups: dict[str, list[int]] = {}
    for j in jobs:
        if not _here(j):
            continue
        if j.pgid:
            if not procs.may_signal_group(j.pgid):
                return _held(j.job_id, "its process group belongs to another user")
            groups[j.job_id] = [j.pgid] if procs.group_alive(j.pgid, j.pgid_start) else []
        elif j.uid is not None and j.uid != os.geteuid() and os.geteuid() != 0:
            return _held(j.job_id, "its worker was another user's and its process group was never recorded")
        else:
            # Never recorded (its worker died within RECORD_AFTER of starting it, or before it
            # started at all): find the processes this worker started for the job by their
            # environment. Not by attempt: a job given back unstarted runs its next copy, perhaps
            # already started by another worker, under the same attempt number.
            # And by the worker's pid: worker numbers and job ids are only unique within one database,
            # and another database's worker on this host may run a job of the same id under the same
            # number (a job of an older queuectl, started without the pid, is not found).
            groups[j.job_id] = sorted(procs.groups_with_env(
                b"QUEUECTL_JOB_ID=" + j.job_id.encode(), b"QUEUECTL_WORKER_ID=%d" % j.worker_id,
                b"QUEUECTL_WORKER_PID=%d" % (j.worker_pid or 0)))
    for job_id, pgids in groups.items():
        for pgid in pgids:
            try:
                gone = procs.kill_and_wait(pgid)
            except PermissionError:
                return _held(job_id, "its process group belongs to another user")
            if not gone:
                return _held(job_id, f"its process group {pgid} outlived SIGKILL")
            log.warning("killed the leftover process group %d of job %s", pgid, job_id)
    return True
