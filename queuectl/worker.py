"""The worker: claim jobs, run them in up to N slots, heartbeat, recover dead workers' jobs, drain on stop.

One thread does everything; it sleeps in the runner's select() until a job ends, output
arrives, a signal wakes it, or a timer (heartbeat, poll) is due. The worker knows no
SQL: every state change goes through the store.

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
"""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from queuectl import liveness, procs
from queuectl import settings as settings_mod
from queuectl.clock import STEP_TOLERANCE, Instant
from queuectl.errors import Conflict, DatabaseError, DatabaseUnavailable, InvalidConfig, InvalidInput, QueuectlError
from queuectl.models import JobState, one_line
from queuectl.notify import Notifier
from queuectl.runner import JobEnvironment, Runner
from queuectl.signals import drain, on_stop
from queuectl.wake import listen as listen_for_pokes
from queuectl.store import PURGE_BATCH, Outcome, Store, WorkerGone

log = logging.getLogger("queuectl.worker")

_NAME = re.compile(r"[A-Za-z0-9._:@-]{1,64}")

EXIT_OK = 0
EXIT_LOST = 1  # another worker declared this one dead and took its jobs
EXIT_CONFIG = 78
#: Seconds a job runs before its process group is written to the database for recovery.
RECORD_AFTER = 0.02
#: Seconds between tries of the database after it failed (locked, full, failing).
DB_RETRY = 1.0
#: Seconds between retention passes, at most (while there is a backlog, a batch every turn of
#: the loop; with short keep-* settings, twice per the shortest, but not more than once a second).
RETENTION_EVERY = 60.0
#: Seconds between giving freed pages back and cutting the WAL back, at most.
RECLAIM_EVERY = 10.0
#: The share of the file that must be free pages before a worker gives them back.
RECLAIM_FREE = 0.25


def _held(job_id: str, why: str) -> bool:
    """Log why a lost worker's jobs are not recovered now; return False (for _kill_local)."""
    log.error("not recovering job %s and its worker's other jobs yet: %s", job_id, why)
    return False


def default_name() -> str:
    """Return a worker name unique on this host: HOSTNAME-PID."""
    return f"{procs.hostname()}-{os.getpid()}"


def check_name(name: str) -> str:
    """Return `name` if it is a valid worker name; raises InvalidInput."""
    if not _NAME.fullmatch(name):
        raise InvalidInput("worker name must be 1-64 characters of letters, digits and ._:@-")
    return name


@dataclass
class Stats:
    """What this worker incarnation has done."""

    done: int = 0
    failed: int = 0
    recovered: int = 0


@dataclass
class Worker:
    """A worker process bound to one store.

    `slots` is how many jobs run at once; `queues` limits claiming (empty: every queue);
    `burst` exits once no job is ready, waiting for a retry, running here, or held by a
    dead or stale worker. `clock` gives Unix seconds (default: the store's clock, which on
    PostgreSQL is the server's), `monotonic` CLOCK_MONOTONIC seconds (timers, liveness and
    due times: see queuectl.clock); both injectable.
    """

    store: Store
    name: str
    slots: int = 1
    queues: Sequence[str] = ()
    burst: bool = False
    unit: str | None = None
    clock: Callable[[], float] | None = None
    monotonic: Callable[[], float] = time.monotonic
    worker_id: int | None = None
    stats: Stats = field(default_factory=Stats)
    stop_requests: int = 0
    notifier: Notifier = field(default_factory=Notifier)

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.clock is None:
            self.clock = self.store.clock
        if self.slots < 1:
            raise InvalidInput("a worker needs at least 1 slot")
        self.config = self._load_settings()
        self.runner = Runner(self.config["output-limit"], clock=self.monotonic)
        self._forced: set[str] = set()  # jobs stopped by a second signal: requeued, not failed
        self._unrecorded: list = []  # (job id, RunResult, when it ended on self.clock) of ended jobs not yet written
        self._draining_recorded = False
        self._poke = None  # the wake-up socket (queuectl.wake)
        self._wakeups = None  # the store's wake-up source (PostgreSQL's LISTEN), if any
        self._env = JobEnvironment()
        self._unrecorded_groups: dict = {}  # job id -> RunningJob whose group is not yet in the database
        self._watch = liveness.Watch()
        self._look_for_cancels = True  # set by each heartbeat and wake-up: `queuectl cancel` pokes
        self._cancelling: set[str] = set()
        self._retention_at = 0.0  # monotonic time of the next retention pass
        self._reclaim_at = 0.0
        self._purged = 0  # jobs deleted since space was last reclaimed
        self._held_by_lost = 0  # jobs in our queues held by dead, stale or suspect workers, at the last sweep
        self._last_beat: Instant | None = None
        self._db_failing_since: float | None = None  # monotonic time of the first failed write of an outage
        self._db_error_logged = (None, 0.0)  # (message, monotonic time) of the last one logged
        self._unregistered_stop = False  # stopped while the database failed: the registration stays
        self._listen()  # now: a connection that cannot carry wake-ups (a pooler) is refused before any work

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self) -> int:
        """Register, work until stopped (or, with burst, until idle), deregister; return an exit code."""
        with on_stop(self.request_stop) as wake:
            self.runner.add_wake_fd(wake.fileno())
            self._poke = listen_for_pokes(os.getpid())
            if self._poke is not None:
                self.runner.add_wake_fd(self._poke.fileno())
            self.register()  # the loop's first heartbeat, at once, recovers what dead workers left
            self.notifier.ready(self._status_line())
            code = None
            try:
                code = self._loop(wake)
            finally:
                # Deregister only after a clean stop: a worker declared dead has no row left, and
                # one that crashed leaves its row for recovery to find.
                if code == EXIT_OK and not self._unregistered_stop:
                    try:  # a --burst drain may end before its next heartbeat would have done it
                        self.store.maintain(self.worker_id)
                    except QueuectlError as e:
                        log.warning("housekeeping at exit skipped: %s", e)
                    self.store.deregister(self.worker_id)
                self.runner.close()
                if self._poke is not None:
                    self._poke.close()
        return code

    def request_stop(self, signum: int) -> None:
        """Record a stop request (a signal handler: no I/O here). The second one forces the stop."""
        self.stop_requests += 1

    def register(self) -> None:
        """Register this incarnation; recover at once the jobs a dead predecessor of the same name left.

        Raises Conflict if a live worker already has this name.
        """
        now = self.now()
        replace = None
        previous = self.store.worker_by_name(self.name)
        if previous is not None:
            alive = liveness.owner_alive(previous)
            if alive is None:  # another host: only its heartbeat can tell
                alive = liveness.heartbeat_age(previous, now) < self.config["stale-after"]
            if alive:
                hint = "" if previous.host == procs.hostname() else (
                    "; workers on several hosts need names of their own, such as queuectl-worker@HOST-1")
                raise Conflict(f"a worker named {self.name!r} is already running (pid {previous.pid} on"
                               f" {previous.host}){hint}")
            if not self._kill_local(self.store.worker_jobs(previous.id)):
                raise Conflict(f"the previous worker named {self.name!r} left jobs running that this user cannot"
                               " kill; start it as that user")
            replace = previous.id
        info = {
            "name": self.name, "host": procs.hostname(), "boot_id": procs.boot_id(), "pid": os.getpid(),
            "pid_start": procs.process_start_time(os.getpid()), "pid_ns": procs.pid_namespace(), "uid": os.geteuid(),
            "slots": self.slots,
            "queues": list(self.queues), "unit": self.unit,
        }
        self.worker_id, recovered = self.store.register_worker(
            info, now, replace=replace, config=self.config,
            replace_seen=previous.seen if replace is not None else None)
        self._report_recovered(recovered, "its previous incarnation")
        log.info("worker %s started: %d slot(s), queues %s", self.name, self.slots,
                 ",".join(self.queues) or "(all)")

    # -- the loop ----------------------------------------------------------------------------------

    def _loop(self, wake) -> int:
        next_beat = self.monotonic()
        retry_at = None  # after a database error: no database work before this (monotonic)
        announced = 0
        while True:
            if self.stop_requests > announced:
                announced = self._on_stop_request(announced)
            now = self.monotonic()
            if retry_at is not None and now < retry_at:
                wait = retry_at - now  # jobs run on and their output is read meanwhile
            else:
                retry_at = None
                try:
                    if now >= next_beat:
                        if not self._heartbeat():
                            return EXIT_LOST
                        next_beat = now + self._beat_interval()
                    stopping = self.stop_requests > 0
                    if stopping and not self._draining_recorded:
                        self.store.mark_draining(self.worker_id, self.now())
                        self._draining_recorded = True
                    claimed = self._exchange(stopping)
                    record_in = self._record_groups()
                    self._stop_cancelled()
                    if not stopping:
                        self._retention()
                    if not self.runner.running and not claimed and not self._unrecorded:
                        if stopping:
                            log.info("worker %s stopped: %s", self.name, self._summary())
                            return EXIT_OK
                        if self.burst and not self._held_by_lost and not self.store.has_work(self.queues,
                                                                                              self.now()):
                            log.info("worker %s: no more work (burst): %s", self.name, self._summary())
                            return EXIT_OK
                    wait = max(0.0, next_beat - self.monotonic())
                    if not stopping and len(self.runner.running) < self.slots:
                        wait = min(wait, self.config["poll-interval"])
                    if record_in is not None:
                        wait = min(wait, record_in)
                    self._database_works()
                except WorkerGone:
                    return self._declared_dead()
                except (DatabaseError, InvalidInput) as e:  # InvalidInput: a database turned read-only
                    # An unreachable, locked, full or failing database: keep the jobs running and their
                    # results in memory, and try again in DB_RETRY seconds (not at every wake-up: output
                    # arrives all the time). The watchdog is pinged only if the database is unavailable
                    # (the module's watchdog rule).
                    self._database_failed(e)
                    if self.stop_requests and not self.runner.running and not self._unrecorded:
                        return self._stop_unregistered()
                    retry_at = self.monotonic() + DB_RETRY
                    wait = DB_RETRY
            self.notifier.status(self._status_line())
            finished, woken = self.runner.wait(wait)
            if woken:
                drain(wake)
                if self._poke is not None:
                    drain(self._poke)
                if self._wakeups is not None:
                    self._wakeups.take()
                    if self._wakeups.broken:  # out of the selector before any new fd can reuse its number
                        self._drop_wakeups()
                self._look_for_cancels = True
            if finished:
                ended = self.clock()
                self._unrecorded.extend((key, result, ended) for key, result in finished)

    def _on_stop_request(self, announced: int) -> int:
        if announced == 0:
            log.info("stop requested: draining %d running job(s); a second signal stops them",
                     len(self.runner.running))
            self.notifier.stopping(f"draining {len(self.runner.running)} job(s)")
        if self.stop_requests >= 2 and self.runner.running and not self._forced:
            log.warning("second stop request: terminating %d running job(s) and requeueing them",
                        len(self.runner.running))
            self._forced.update(self.runner.running)
            self.runner.stop_all(signal.SIGTERM)
        return self.stop_requests

    def now(self) -> Instant:
        """This worker's clocks now: the wall clock, the monotonic clock and its domain."""
        return Instant(self.clock(), self.monotonic(), procs.clock_domain())

    def _heartbeat(self) -> bool:
        """Write the heartbeat, then ping the watchdog; return False if this worker was declared dead.

        The first heartbeat after failed database calls gives every other worker stale-after
        before it judges them (their heartbeats failed too, and come back up to a reconnection
        later than this one's), however short the outage was.
        """
        now = self.now()
        if not self.store.heartbeat(self.worker_id, now):
            self._declared_dead()
            return False
        self.notifier.watchdog()  # after the database took the heartbeat
        self._look_for_cancels = True
        if self._db_failing_since is not None:
            self._watch.writes_resumed(Instant(now.wall, self.monotonic(), now.domain))
        self._note_gap(now)
        self._listen()
        self._reload_settings()
        self.recover_lost()
        self.store.maintain(self.worker_id)
        return True

    def _listen(self) -> None:
        """Keep the store's wake-up source in the runner's select(): opened again after it broke.

        A broken source leaves the selector before the store closes or replaces it: libpq may
        have closed its socket already, and a job's pipe started next could get the same fd
        number (a selector that still held it would refuse the pipe).
        """
        if self._wakeups is not None and self._wakeups.broken:
            self._drop_wakeups()
        if self._wakeups is not None:
            return
        source = self.store.wakeup_source()
        if source is not None:
            self._wakeups, self._wakeups_fd = source, source.fileno()
            self.runner.add_wake_fd(self._wakeups_fd)

    def _drop_wakeups(self) -> None:
        """Take the broken wake-up source out of the selector (the store closes it when it opens the next)."""
        self.runner.remove_wake_fd(self._wakeups_fd)
        self._wakeups = None

    def _declared_dead(self) -> int:
        log.error("worker %s was declared dead by another worker and its jobs were recovered; exiting",
                  self.name)
        self.runner.stop_all(signal.SIGKILL)
        return EXIT_LOST

    def _note_gap(self, now: Instant) -> None:
        """Look at the time since the last heartbeat: a wall-clock step, or a worker held up.

        A wall-clock step (wall delta against monotonic delta) is only logged: liveness and
        due times are judged on monotonic clocks. A heartbeat that came late (a write that
        waited long for a lock, a process stopped or starved) means this worker could not
        watch the others meanwhile: they get stale-after to show a sign of life.
        """
        last, self._last_beat = self._last_beat, now
        if last is None:
            return
        step = (now.wall - last.wall) - (now.mono - last.mono)
        if abs(step) > STEP_TOLERANCE:
            log.warning("the wall clock stepped by %+.1f s since the last heartbeat; liveness and due"
                        " times follow the monotonic clock, so no job is affected", step)
        if self.monotonic() - last.mono > 2 * self._beat_interval() + 1:
            self._watch.writes_resumed(Instant(now.wall, self.monotonic(), now.domain))

    def _database_failed(self, error: DatabaseError | InvalidInput) -> None:
        """Note a failed database operation; log it when it is new, then at most every 30 s.

        Ping the watchdog if the database is unavailable: the loop lives (the module's watchdog rule).
        """
        mono = self.monotonic()
        if self._db_failing_since is None:
            self._db_failing_since = mono
        if isinstance(error, DatabaseUnavailable):
            self.notifier.watchdog()
        message, logged_at = self._db_error_logged
        if str(error) != message or mono - logged_at >= 30:
            held = len(self.runner.running) + len(self._unrecorded)
            log.error("%s; keeping %d job(s) and their results, retrying every %g s", error, held, DB_RETRY)
            self._db_error_logged = (str(error), mono)

    def _stop_unregistered(self) -> int:
        """Stop (asked to) while the database fails, with nothing running or held: waiting for it
        would only hold the stop up, maybe for systemd's whole TimeoutStopSec. The registration is
        left behind; the next worker of this host to look finds its process gone and removes it."""
        log.warning("worker %s stopped while the database fails; its registration is left for a worker of"
                    " this host to remove: %s", self.name, self._summary())
        self._unregistered_stop = True
        return EXIT_OK

    def _database_works(self) -> None:
        """After an outage (once a whole turn of the loop succeeded): say so, and give every other
        worker stale-after to beat again (queuectl.liveness rule 2)."""
        if self._db_failing_since is None:
            return
        now = self.now()
        log.warning("the database takes writes again after %.1f s", now.mono - self._db_failing_since)
        self._watch.writes_resumed(now)
        self._db_failing_since = None
        self._db_error_logged = (None, 0.0)

    def _beat_interval(self) -> float:
        """Seconds to the next heartbeat: heartbeat-interval, or less when systemd's watchdog needs pings."""
        interval = self.config["heartbeat-interval"]
        if self.notifier.watchdog_interval is not None:
            interval = min(interval, self.notifier.watchdog_interval)
        return interval

    def _summary(self) -> str:
        recovered = f", {self.stats.recovered} recovered" if self.stats.recovered else ""
        return f"{self.stats.done} done, {self.stats.failed} failed{recovered}"

    def _status_line(self) -> str:
        """One line for systemd's STATUS=: idle, the running jobs or the database's outage; the counts so far."""
        running = list(self.runner.running)
        if self._db_failing_since is not None:
            return (f"database unavailable for {self.monotonic() - self._db_failing_since:.0f} s; {len(running)}"
                    f" job(s) running and {len(self._unrecorded)} result(s) held; {self._summary()}")
        if self.stop_requests:
            head = f"draining {len(running)} job(s)"
        elif running:
            head = f"running {len(running)}/{self.slots} job(s)"
        else:
            head = f"idle, {self.slots} slot(s)"
        ids = f": {', '.join(running[:5])}{', ...' if len(running) > 5 else ''}" if running else ""
        return f"{head}{ids}; {self._summary()}"

    def _exchange(self, stopping: bool) -> int:
        """Record ended jobs and claim as many new ones as slots are free, in one transaction; start them.

        Returns how many jobs were claimed. On a database error the ended jobs' results stay
        in memory for the next try.
        """
        free = 0 if stopping else self.slots - len(self.runner.running)
        finished = self._unrecorded
        if not finished and free <= 0:
            return 0
        forced = [key for key, _, _ in finished if key in self._forced]
        outcomes = [Outcome(key, r.ok, r.exit_code, r.error, r.stdout, r.stderr, ended)
                    for key, r, ended in finished if key not in self._forced]
        states, jobs = self.store.exchange(self.worker_id, outcomes, forced, self.queues, free, self.now(),
                                           self.config)
        self._unrecorded = []
        for key in forced:
            self._forced.discard(key)
            log.warning("job %s stopped and put back to pending", key)
        for outcome, state in zip(outcomes, states):
            self._report(outcome, state)
        self._start(jobs)
        return len(jobs)

    def _stop_cancelled(self) -> None:
        """Stop the running jobs whose cancel was requested (SIGTERM to the group, SIGKILL after the grace).

        Looked for after each heartbeat and wake-up; their results are then recorded as
        cancelled by the store (or completed, if they exited 0 first).
        """
        if not self._look_for_cancels or not self.runner.running:
            return
        self._look_for_cancels = False
        now = self.monotonic()
        for job_id in self.store.cancel_requests(self.worker_id):
            job = self.runner.running.get(job_id)
            if job is not None and job_id not in self._cancelling:
                self._cancelling.add(job_id)
                log.warning("job %s: cancel requested, stopping its process group", job_id)
                job.stop(signal.SIGTERM, now, self.runner.kill_grace)
        self._cancelling &= set(self.runner.running)

    def _retention(self) -> None:
        """Delete expired finished jobs (keep-completed, keep-cancelled, keep-dead) in bounded batches.

        One worker at a time, under the "retention" lease; a batch is one short
        transaction of at most PURGE_BATCH jobs, and a full batch brings the next one
        at the next turn of the loop. Freed pages go back to the filesystem at most every
        RECLAIM_EVERY seconds.
        """
        mono = self.monotonic()
        if mono < self._retention_at:
            return
        older = {state: self.config[key] for state, key in settings_mod.RETENTION.items()
                 if self.config[key] is not None}
        self._retention_at = mono + min(RETENTION_EVERY, max(1.0, min(older.values(), default=0) / 2))
        now = self.now()
        if not older or not self.store.take_lease("retention", self.worker_id, now, 3 * RETENTION_EVERY):
            return
        deleted = self.store.purge(older, now)
        self._purged += deleted
        if deleted >= PURGE_BATCH:
            self._retention_at = mono  # a backlog: go on at the next turn
        if self._purged and mono >= self._reclaim_at:
            self.store.reclaim_space(max_pages=16 * PURGE_BATCH, min_free=RECLAIM_FREE)
            log.info("retention: deleted %d expired job(s)", self._purged)
            self._purged, self._reclaim_at = 0, mono + RECLAIM_EVERY

    def _report(self, outcome: Outcome, state) -> None:
        if state is None:
            log.warning("job %s was taken from this worker (recovered elsewhere); its result is dropped",
                        outcome.job_id)
        elif state == JobState.CANCELLED:
            log.warning("job %s cancelled (%s)", outcome.job_id, outcome.error or "it had ended")
        elif outcome.ok:
            self.stats.done += 1
            log.info("job %s completed", outcome.job_id)
        else:
            self.stats.failed += 1
            log.warning("job %s failed (%s): now %s", outcome.job_id, outcome.error, state.value)

    def _start(self, jobs) -> None:
        """Start claimed jobs; their process groups are recorded once they outlive RECORD_AFTER."""
        for job in jobs:
            timeout = job.timeout if job.timeout is not None else self.config["job-timeout"]
            env = self._env.job({"QUEUECTL_JOB_ID": job.id, "QUEUECTL_ATTEMPT": str(job.attempts),
                                 "QUEUECTL_QUEUE": job.queue})
            proc = self.runner.start(job.id, job.command, cwd=job.cwd, timeout=timeout, env=env)
            if proc is not None:
                self._unrecorded_groups[job.id] = proc
            # DEBUG: a line per start would double the log's cost per job; ends are logged at INFO
            log.debug("job %s started (attempt %d): %s", job.id, job.attempts, one_line(job.command, 80))

    def _record_groups(self) -> float | None:
        """Record the process groups of jobs running for RECORD_AFTER or more; return when to look again.

        A job that ends sooner never needs its group recorded, which spares a commit per
        short job; a recovery finds an unrecorded group by the job's environment.
        """
        now = self.monotonic()
        due = {k: p for k, p in self._unrecorded_groups.items() if k in self.runner.running
               and now - p.started >= RECORD_AFTER}
        if due:
            self.store.record_processes(self.worker_id, [(k, p.pgid, p.pgid_start) for k, p in due.items()])
        self._unrecorded_groups = {k: p for k, p in self._unrecorded_groups.items()
                                   if k in self.runner.running and k not in due}
        if not self._unrecorded_groups:
            return None
        return max(0.0, min(p.started for p in self._unrecorded_groups.values()) + RECORD_AFTER - now)

    # -- recovery ----------------------------------------------------------------------------------

    def recover_lost(self) -> None:
        """Recover the jobs of workers that are dead or stale (queuectl.liveness), and of none.

        A dead or stale worker's jobs still running on this host are killed first (their
        groups, if still the recorded ones), so two copies of a job never run at once; a
        worker whose jobs cannot all be killed from here keeps them. Each recovery checks
        in its transaction that the worker did not beat since it was judged. Stale workers
        are recovered by one worker at a time, the holder of the "recovery" lease (every
        worker watches, so another takes over at once when it goes); a dead local one by any
        worker of its host, which alone can kill its leftovers. Counts the jobs in this
        worker's queues that are left held by lost or suspect workers, for --burst.
        """
        now, stale_after = self.now(), self.config["stale-after"]
        held, leads = 0, None
        others = [w for w in self.store.workers() if w.id != self.worker_id]
        self._watch.forget_others(w.id for w in others)
        for w in others:
            verdict = self._watch.verdict(w, now, stale_after)
            if verdict == liveness.ALIVE:
                continue
            if verdict == liveness.STALE and leads is None:
                leads = self.store.take_lease("recovery", self.worker_id, now, stale_after)
            jobs = self.store.worker_jobs(w.id)
            if verdict == liveness.SUSPECT or (verdict == liveness.STALE and not leads) or not self._kill_local(jobs):
                held += sum(1 for j in jobs if self._serves(j.queue))
                continue
            whose = f"{'dead' if verdict == liveness.DEAD else 'stale'} worker {w.name!r}"
            self._report_recovered(self.store.recover(w.id, w.seen, now, self.config), whose)
        if self.store.orphaned_jobs():
            self._report_recovered(self.store.recover(None, None, now, self.config), "no registered worker")
        self._held_by_lost = held

    def _serves(self, queue: str) -> bool:
        return not self.queues or queue in self.queues

    @staticmethod
    def _kill_local(jobs) -> bool:
        """Kill what is left on this host of a lost worker's jobs, and wait until it is gone.

        Returns False, having killed nothing, if a leftover group may belong to another user
        (kill(2) refuses it, or the worker was another user's and a group was never
        recorded), and False if a group outlives its SIGKILL: the jobs then stay held
        rather than run twice.
        """
        groups: dict[str, list[int]] = {}
        for j in jobs:
            if j.host is None or not procs.is_local(j.host, j.boot_id, j.pid_ns):
                continue
            if j.pgid:
                if not procs.may_signal_group(j.pgid):
                    return _held(j.job_id, "its process group belongs to another user")
                groups[j.job_id] = [j.pgid] if procs.group_alive(j.pgid, j.pgid_start) else []
            elif j.uid is not None and j.uid != os.geteuid() and os.geteuid() != 0:
                return _held(j.job_id, "its worker was another user's and its process group was never recorded")
            else:
                # Never recorded (its worker died within RECORD_AFTER of starting it): find this
                # attempt's processes by their environment.
                groups[j.job_id] = sorted(procs.groups_with_env(
                    b"QUEUECTL_JOB_ID=" + j.job_id.encode(), b"QUEUECTL_ATTEMPT=%d" % j.attempts))
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

    def _report_recovered(self, recovered, whose: str) -> None:
        for job_id, state in recovered:
            self.stats.recovered += 1
            log.warning("recovered job %s from %s (worker lost): now %s", job_id, whose, state.value)

    # -- settings ----------------------------------------------------------------------------------

    def _load_settings(self) -> dict:
        config = self.store.settings()
        try:
            settings_mod.check_consistent(config)
        except InvalidInput as e:
            raise InvalidConfig(str(e)) from None
        return config

    def _reload_settings(self) -> None:
        try:
            self.config = self._load_settings()
        except QueuectlError as e:
            log.error("keeping the previous settings: %s", e)
        self.runner.output_limit = self.config["output-limit"]
