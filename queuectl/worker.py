"""The worker: claim jobs, run them in up to N slots, record how they ended, heartbeat, drain on stop.

One thread does everything; it sleeps in the runner's select() until a job ends, output
arrives, a signal wakes it, or a timer (heartbeat, poll, a record's deadline) is due, and
then `tick` does what is due. The worker knows no SQL: every state change goes through the
store, and the duties that are not running jobs live in rooms of their own: watching the
other workers and recovering their jobs in queuectl.recovery, deleting expired jobs in
queuectl.retention, firing schedules' due slots in queuectl.scheduler.

The hot path (queuectl.store.base.Exchange): a worker's writes are batched into exchanges,
one transaction each, that record every start, process group and end since the last one,
give back what it will not run, and claim as many jobs as it has room for. The rules:
- Claims: as many as free slots; while jobs are short (the last one ended within HOLD
  seconds of its start) also up to PREFETCH_PER_SLOT x slots ahead (the reserve), topped up
  once the reserve is half used, so that a slot that frees starts the next job at once, with
  the database's work done while jobs run. A claimed job counts no attempt until its start is
  recorded. A job held in the reserve behind slots all busy with jobs running HOLD seconds or
  more is given back (released) at once: a long job never keeps another worker from the jobs
  behind it. Fairness: no worker holds more than slots + PREFETCH_PER_SLOT x slots jobs.
  Jobs of a limited queue (queuectl.store.limits) are claimed ahead within half the room the
  limit leaves; when one ends, the worker claims again at once (its place in the limit is free),
  not at the next poll, and a claim that a rate limit held back is tried again when the window
  frees a place (Store.rate_room_at), if that comes before the poll.
- Records: an end is recorded at once, unless the worker is busy with short jobs; then within
  RECORD_WITHIN seconds (with the ends that come meanwhile). A start is recorded with the next
  exchange, at the latest RECORD_AFTER seconds after it, together with the job's process
  group (a job that ends sooner has its start recorded with its end, and its group never);
  a job's last attempt (queuectl.backoff.last_attempt) has its start recorded before it runs,
  one write of its own.
- A crash between a job's exit and its record re-runs it (at least once): the window is
  RECORD_WITHIN seconds while the worker batches, the exchange's own time otherwise. A crash
  before a start is recorded (RECORD_AFTER at most) counts the attempt all the same, for the
  job may have run (a job that kills its worker at once must still reach the dead letter
  queue): so do the jobs claimed ahead and not started, except one whose next run is its last
  attempt, which goes back uncounted, since it cannot have started unrecorded. A job thus runs
  at most max_retries + 1 times however its worker dies; a worker's death may cost the jobs it
  held in reserve one retry each, never their last. No job starts while the database fails, nor while the last heartbeat is older
  than stale-after / 2: a worker held up (frozen, starved) writes its heartbeat first, and so
  learns whether it was found stale and its claims given back, before it starts what it
  claimed before.

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
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

from queuectl import procs
from queuectl import settings as settings_mod
from queuectl.backoff import last_attempt
from queuectl.clock import STEP_TOLERANCE, Instant
from queuectl.errors import DatabaseError, DatabaseUnavailable, InvalidConfig, InvalidInput, NotFound, QueuectlError
from queuectl.models import Job, JobState, one_line
from queuectl.notify import Notifier
from queuectl.recovery import Recovery
from queuectl.retention import Retention
from queuectl.scheduler import Scheduler
from queuectl.runner import JobEnvironment, RunResult, Runner
from queuectl.signals import drain, on_stop
from queuectl.store import Exchange, LiveOutput, Outcome, Running, Store, WorkerGone
from queuectl.wake import listen as listen_for_pokes

log = logging.getLogger("queuectl.worker")

_NAME = re.compile(r"[A-Za-z0-9._:@-]{1,64}")

EXIT_OK = 0
EXIT_LOST = 1  # another worker declared this one dead and took its jobs
EXIT_CONFIG = 78
#: Seconds a job runs before its start and process group must be recorded (for recovery).
RECORD_AFTER = 0.02
#: Seconds an end may wait to be recorded with the ends that follow, while the worker runs short jobs.
RECORD_WITHIN = 0.01
#: Seconds below which a job counts as short (the worker then claims ahead), and the longest a
#: claimed-ahead job waits behind slots that are all busy before it is given back.
HOLD = 0.02
#: Seconds between records of a running job's new output (for `logs --follow`, which reads it within
#: 1 s): a job that ends sooner, as short jobs do, has its output recorded with its end alone.
OUTPUT_EVERY = 0.25
#: Jobs claimed ahead per slot while jobs are short (the module's rules).
PREFETCH_PER_SLOT = 8
#: Seconds between tries of the database after it failed (locked, full, failing).
DB_RETRY = 1.0
#: The error of a job this worker started whose recorded end the database no longer has (it went back in
#: time: a failover to a standby that had not received it, a restore), found after a database error.
RUN_LOST = "run lost: the database has it running here, and it is not (its recorded end was lost)"
#: The shortest wait for a rate limit's window to free a place (so that clocks read a moment apart never
#: make a worker claim in a loop).
RATE_WAIT_MIN = 0.01


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


def output_due(proc) -> float:
    """The monotonic time by which a running job's new output is to be recorded (inf: it has none)."""
    return proc.flushed_at + OUTPUT_EVERY if proc.unflushed() else float("inf")


class Ledger:
    """What this worker knows and the store does not yet: starts, process groups, ends, jobs to give back.

    Times: `mono` CLOCK_MONOTONIC seconds (deadlines), `wall` the store's clock (recorded).
    """

    def __init__(self):
        self.starts: dict[str, float] = {}  # job id -> wall time of a start not yet recorded
        self.groups: dict[str, object] = {}  # job id -> RunningJob whose process group is not yet recorded
        self.ended: list[tuple[str, object, float, float]] = []  # (job id, RunResult, wall, mono) not yet recorded
        self.release: list[str] = []  # claimed jobs given back unstarted
        self.forced: set[str] = set()  # running jobs stopped by a second signal: requeued, not failed

    def __bool__(self) -> bool:
        return bool(self.starts or self.groups or self.ended or self.release)

    def started(self, job_id: str, proc, wall: float) -> None:
        """Note a start at `wall`; `proc` is its RunningJob (None: it could not start, and its failure
        comes with the next ends)."""
        self.starts[job_id] = wall
        if proc is not None:
            self.groups[job_id] = proc

    def due(self, mono: float, batching: bool) -> float:
        """The monotonic time by which the next exchange must record what is here (inf: nothing to record)."""
        due = float("inf")
        if self.release:
            return mono
        if self.ended:
            due = self.ended[0][3] + RECORD_WITHIN if batching else mono
        if self.groups:
            due = min(due, min(p.started for p in self.groups.values()) + RECORD_AFTER)
        return due

    def batch(self, running: dict, mono: float, claim: int, free: int | None = None) -> Exchange:
        """The Exchange that records everything here (groups of jobs that ran RECORD_AFTER or more) and claims `claim`
        (`free` of them for free slots: see Exchange.free)."""
        ended_ids = {key for key, _, _, _ in self.ended}
        entries = []
        for job_id in {**self.starts, **self.groups}:
            if job_id in ended_ids or job_id not in running:
                continue
            proc = self.groups.get(job_id)
            if proc is not None and mono - proc.started < RECORD_AFTER:
                proc = None
            entries.append(Running(job_id, self.starts.get(job_id), proc.pgid if proc else None,
                                   proc.pgid_start if proc else None))
        requeue = [key for key, _, _, _ in self.ended if key in self.forced]
        ended = [Outcome(key, r.ok, r.exit_code, r.error, r.stdout, r.stderr, wall, self.starts.get(key), r.written)
                 for key, r, wall, _ in self.ended if key not in self.forced]
        output = [LiveOutput(*proc.output_since(proc.flushed), *proc.flushed, proc.written, job_id=job_id)
                  for job_id, proc in running.items() if output_due(proc) <= mono]
        return Exchange(entries, ended, requeue, list(self.release), claim, output, free)

    def recorded(self, ex: Exchange) -> None:
        """Forget what `ex` recorded (the store committed it)."""
        for r in ex.running:
            self.starts.pop(r.job_id, None)
            if r.pgid is not None:
                self.groups.pop(r.job_id, None)
        for key, _, _, _ in self.ended:
            self.starts.pop(key, None)
            self.groups.pop(key, None)
            self.forced.discard(key)
        self.ended = []
        self.release = []


@dataclass
class Worker:
    """A worker process bound to one store.

    `slots` is how many jobs run at once; `queues` limits claiming (empty: every queue);
    `burst` exits once no job is ready, waiting for a retry, running here, or held by a
    dead or stale worker. `clock` gives Unix seconds (default: the store's clock, which on
    PostgreSQL is the server's), `monotonic` CLOCK_MONOTONIC seconds (timers, liveness and
    due times: see queuectl.clock); both injectable, and `tick` is one turn of the loop,
    which a test may drive.
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
        self.recovery = Recovery(self.store, self.queues)
        self.retention = Retention()
        self.scheduler = Scheduler()
        self._limited_jobs: set[str] = set()  # running jobs of limited queues (self.limited)
        self.limited: frozenset[str] = frozenset()  # the limited queues the last claim saw (Exchanged.limited)
        self.prefetch = PREFETCH_PER_SLOT * self.slots
        self.reserve: deque[Job] = deque()  # claimed, not started
        self.ledger = Ledger()
        self.exit_code: int | None = None
        self._short = False  # the last job ended within HOLD of its start: claim ahead
        self._claim_at = 0.0  # monotonic time before which no claim is tried (the queue was found empty)
        self._next_beat = 0.0
        self._retry_at: float | None = None  # after a database error: no database work before this (monotonic)
        self._draining_recorded = False
        self._poke = None  # the wake-up socket (queuectl.wake)
        self._wakeups = None  # the store's wake-up source (PostgreSQL's LISTEN), if any
        self._env = JobEnvironment()
        self._look_for_cancels = True  # set by each heartbeat and wake-up: `queuectl cancel` pokes
        self._cancelling: set[str] = set()
        self._last_beat: Instant | None = None
        self._db_failing_since: float | None = None  # monotonic time of the first failed write of an outage
        self._grace_given = False  # the other workers got their grace after this outage (_grant_grace)
        self._db_error_logged = (None, 0.0)  # (message, monotonic time) of the last one logged
        self._unregistered_stop = False  # stopped while the database failed: the registration stays
        self._in_doubt = False  # an exchange or another database operation failed: settle what the store holds
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
        previous = self.recovery.predecessor(self.name, now, self.config["stale-after"])
        info = {
            "name": self.name, "host": procs.hostname(), "boot_id": procs.boot_id(), "pid": os.getpid(),
            "pid_start": procs.process_start_time(os.getpid()), "pid_ns": procs.pid_namespace(), "uid": os.geteuid(),
            "slots": self.slots,
            "queues": list(self.queues), "unit": self.unit,
        }
        self.worker_id, recovered = self.store.register_worker(
            info, now, replace=previous.id if previous else None, config=self.config,
            replace_seen=previous.seen if previous else None)
        self.recovery.report(recovered, "its previous incarnation")
        self.stats.recovered = self.recovery.recovered
        log.info("worker %s started: %d slot(s), queues %s", self.name, self.slots,
                 ",".join(self.queues) or "(all)")

    # -- the loop ----------------------------------------------------------------------------------

    def _loop(self, wake) -> int:
        announced = 0
        while True:
            if self.stop_requests > announced:
                announced = self._on_stop_request(announced)
            wait = self.tick()
            if wait is None:
                if self.stop_requests > announced:  # a signal during the last turn: it still says STOPPING=1
                    self._on_stop_request(announced)
                return self.exit_code
            if self.notifier.enabled:
                self.notifier.status(self._status_line())
            finished, woken = self.runner.wait(wait)
            if woken:
                self._woken(wake)
            self.note_ended(finished)

    def note_ended(self, finished, now: float | None = None) -> None:
        """Take the runner's ended jobs ([(job id, RunResult)]) into the ledger, ended at monotonic `now`."""
        if finished:
            wall, mono = self.clock(), self.monotonic() if now is None else now
            for key, result in finished:
                self.ledger.ended.append((key, result, wall, mono))
                self._short = result.duration < HOLD
                if key in self._limited_jobs:  # its place in the limit is free: claim now, not at the next poll
                    self._limited_jobs.discard(key)
                    self._claim_at = 0.0

    def tick(self, now: float | None = None) -> float | None:
        """Do what is due at monotonic time `now` (default: the monotonic clock now); return the seconds
        until something is due next (the loop waits that long for a job's end, output or a wake-up),
        or None when the worker is done (`exit_code` says how).

        In order: start claimed jobs in free slots; write the heartbeat (and watch the other workers)
        when due; on a stop, give back what has not started; stop jobs whose cancel was requested;
        exchange with the store when a record is due or a claim is wanted (the module's rules), and
        start what it claimed; run retention when due. A database error keeps everything in memory
        and tries again DB_RETRY seconds later (the module's watchdog rule).
        """
        now = self.monotonic() if now is None else now
        if self._retry_at is not None and now < self._retry_at:
            return self._retry_at - now  # jobs run on and their output is read meanwhile
        self._retry_at = None
        try:
            self._start_reserved(now)
            if now >= self._next_beat or (self.reserve and not self._beat_fresh(now)):
                if not self._heartbeat():
                    self.exit_code = EXIT_LOST
                    return None
                self._next_beat = now + self._beat_interval()
                self._start_reserved(now)
            stopping = self.stop_requests > 0
            if stopping:
                self._drain_begins()
            self._stop_cancelled(now)
            self._release_held(now)
            claim = self._claim_wanted(now, stopping)
            if claim or now >= min(self.ledger.due(now, self._batching()), self._output_due()):
                self._exchange(now, claim)
                self._database_works()  # the held results are in: claimed jobs may start again
                self._start_reserved(now)
            if not stopping and self.retention.due(now):
                self.retention.run(self.store, self.worker_id, self.config, self.now())
            if not stopping and self.scheduler.due(now):
                if any(f.outcome == "added" for f in self.scheduler.run(self.store, self.now())):
                    self._claim_at = 0.0  # claim the new runs now, not at the next poll
            self._database_works()
            self._start_reserved(now)  # what an outage held back (a last attempt's start record failed)
            if self._done(stopping):
                return None
            return self._next_due(now, stopping)
        except WorkerGone:
            self.exit_code = self._declared_dead()
            return None
        except (DatabaseError, InvalidInput) as e:  # InvalidInput: a database turned read-only
            # An unreachable, locked, full or failing database: keep the jobs running and their
            # results in memory, and try again in DB_RETRY seconds (not at every wake-up: output
            # arrives all the time). The watchdog is pinged only if the database is unavailable
            # (the module's watchdog rule).
            self._database_failed(e)
            if self.stop_requests and not self.runner.running and not self.ledger.ended:
                self.exit_code = self._stop_unregistered()
                return None
            self._retry_at = self.monotonic() + DB_RETRY
            return DB_RETRY

    def _woken(self, wake) -> None:
        """A signal, a poke or a notification came: drain them; look for cancels and claims at once."""
        drain(wake)
        if self._poke is not None:
            drain(self._poke)
        if self._wakeups is not None:
            self._wakeups.take()
            if self._wakeups.broken:  # out of the selector before any new fd can reuse its number
                self._drop_wakeups()
        self._look_for_cancels = True
        self._claim_at = 0.0

    def _output_due(self) -> float:
        """The monotonic time by which running jobs' new output is to be recorded (inf: none has any)."""
        return min((output_due(p) for p in self.runner.running.values()), default=float("inf"))

    def _batching(self) -> bool:
        """True while ends may wait RECORD_WITHIN for the ends that follow: short jobs keep the slots busy."""
        return self._short and bool(self.runner.running) and not self.stop_requests

    def _claim_wanted(self, now: float, stopping: bool) -> int:
        """How many jobs to claim now: 0 unless a slot would idle or the reserve is half used (while
        jobs are short), and not before `_claim_at` (after the queue was found empty)."""
        if stopping or now < self._claim_at:
            return 0
        held = len(self.runner.running) + len(self.reserve)
        if held < self.slots or (self._short and len(self.reserve) <= self.prefetch // 2):
            return self.slots + (self.prefetch if self._short else 0) - held
        return 0

    def _next_due(self, now: float, stopping: bool) -> float:
        """Seconds until the next duty: the heartbeat, a record's deadline, a claim, a reserve's release."""
        due = min(self._next_beat, self.ledger.due(now, self._batching()), self._output_due())
        if self.runner.running:  # output read meanwhile does not end the wait: look at it again then
            due = min(due, now + OUTPUT_EVERY)
        if not stopping and len(self.runner.running) + len(self.reserve) < self.slots:
            due = min(due, self._claim_at)
        if not stopping:
            due = min(due, self.scheduler.next_at)
        if self.reserve and self.runner.running and len(self.runner.running) >= self.slots:
            due = min(due, max(p.started for p in self.runner.running.values()) + HOLD)  # all busy HOLD s
        return max(0.0, due - now)

    def _done(self, stopping: bool) -> bool:
        """True (with `exit_code` set) when the worker has stopped or, with burst, has run out of work."""
        if self.runner.running or self.reserve or self.ledger:
            return False
        if stopping:
            log.info("worker %s stopped: %s", self.name, self._summary())
        elif not (self.burst and not self.recovery.held and not self.store.has_work(self.queues, self.now())):
            return False
        else:
            log.info("worker %s: no more work (burst): %s", self.name, self._summary())
        self.exit_code = EXIT_OK
        return True

    def _on_stop_request(self, announced: int) -> int:
        if announced == 0:
            log.info("stop requested: draining %d running job(s); a second signal stops them",
                     len(self.runner.running))
            self.notifier.stopping(f"draining {len(self.runner.running)} job(s)")
        if self.stop_requests >= 2 and self.runner.running and not self.ledger.forced:
            log.warning("second stop request: terminating %d running job(s) and requeueing them",
                        len(self.runner.running))
            self.ledger.forced.update(self.runner.running)
            self.runner.stop_all(signal.SIGTERM)
        return self.stop_requests

    def _drain_begins(self) -> None:
        """On a stop: record that this worker drains, and give back the jobs it claimed and has not started."""
        if not self._draining_recorded:
            self.store.mark_draining(self.worker_id, self.now())
            self._draining_recorded = True
        self._give_back(list(self.reserve))

    def _give_back(self, jobs) -> None:
        for job in jobs:
            self.reserve.remove(job)
            self.ledger.release.append(job.id)

    def now(self) -> Instant:
        """This worker's clocks now: the wall clock, the monotonic clock and its domain."""
        return Instant(self.clock(), self.monotonic(), procs.clock_domain())

    # -- exchanges with the store ------------------------------------------------------------------

    def _exchange(self, now: float, claim: int) -> None:
        """Record what the ledger holds and claim `claim` jobs into the reserve, in one transaction.

        On a database error everything stays in the ledger for the next try.
        """
        if self._in_doubt:
            self._give_back_unknown()
        ex = self.ledger.batch(self.runner.running, now, claim,
                               free=max(0, self.slots - len(self.runner.running) - len(self.reserve)))
        at = self.now()
        try:
            states, jobs, limited = self.store.exchange(self.worker_id, ex, self.queues, at, self.config)
        except DatabaseError:
            self._in_doubt = True  # it may have committed, its reply lost: claims this worker never saw
            raise
        if self._in_doubt:
            states = [self._recorded_before(o) if state is None else state for o, state in zip(ex.ended, states)]
            self._in_doubt = False
        self.ledger.recorded(ex)
        for o in ex.output:
            proc = self.runner.running.get(o.job_id)
            if proc is not None:
                proc.flushed, proc.flushed_at = o.written, now
        for key in ex.requeue:
            log.warning("job %s stopped and put back to pending (cancelled instead if a cancel of it was requested)",
                        key)
        for key in ex.release:
            log.debug("job %s given back unstarted", key)
        for outcome, state in zip(ex.ended, states):
            self._report(outcome, state)
        self.reserve.extend(jobs)
        self.limited = self.limited if limited is None else limited
        if claim and len(jobs) < claim:  # the queue has no more for now: claim again at the next poll ...
            wait = self.config["poll-interval"]
            if self.limited:  # ... or when a rate limit that holds a queue back frees a place, if sooner
                try:
                    room_at = self.store.rate_room_at(self.queues, at)
                except DatabaseError:  # the exchange is done: this read failing only costs the poll's wait
                    room_at = None
                if room_at is not None:
                    wait = min(wait, max(RATE_WAIT_MIN, room_at - at.wall))
            self._claim_at = now + wait

    def _give_back_unknown(self) -> None:
        """After an exchange whose commit is unknown, or any failed database operation: settle the jobs the
        store says this worker holds and it knows nothing of. One never started (claimed by an exchange whose
        reply was lost) is given back. One whose start is recorded ran here and its recorded end is gone: the
        database went back in time (a failover to a standby that had not received it, a restore), so it ends
        failed with RUN_LOST and follows the retry rule, as a job whose worker was lost does (else it would
        stay processing for as long as this worker lives)."""
        known = {*self.runner.running, *(j.id for j in self.reserve), *self.ledger.release,
                 *(key for key, _, _, _ in self.ledger.ended)}
        for j in self.store.worker_jobs(self.worker_id):
            if j.job_id in known:
                continue
            if not j.started:
                log.info("job %s was claimed by an exchange whose reply was lost: giving it back", j.job_id)
                self.ledger.release.append(j.job_id)
            else:
                log.warning("job %s: %s; it ends failed", j.job_id, RUN_LOST)
                self.ledger.ended.append((j.job_id, RunResult(None, RUN_LOST, b"", b"", 0.0), self.clock(),
                                          self.monotonic()))

    def _recorded_before(self, outcome: Outcome):
        """The state of a job whose end the store no longer takes from this worker: recorded by an exchange
        whose reply was lost (its end time is the one this worker sent), or None: recovered elsewhere."""
        try:
            job = self.store.get_job(outcome.job_id)
        except NotFound:
            return None
        return job.state if job.worker_id is None and job.finished_at == outcome.ended_at else None

    def _release_held(self, now: float) -> None:
        """Give back the reserve when every slot is busy with a job running HOLD seconds or more."""
        running = self.runner.running
        if self.reserve and len(running) >= self.slots and all(now - p.started >= HOLD for p in running.values()):
            self._short = False
            self._give_back(list(self.reserve))

    def _start_reserved(self, now: float) -> None:
        """Start claimed jobs in the free slots (not while the database fails: a worker cut off from it may
        be judged stale and its jobs recovered elsewhere)."""
        if not self._beat_fresh(now):
            return
        while self.reserve and len(self.runner.running) < self.slots and self._db_failing_since is None \
                and not self.stop_requests:
            job = self.reserve.popleft()
            try:
                self._start(job, now)
            except (DatabaseError, WorkerGone):  # its start could not be recorded first: it did not start
                self.reserve.appendleft(job)
                raise

    def _beat_fresh(self, now: float) -> bool:
        """True while this worker's last heartbeat is younger than stale-after / 2 at monotonic `now`, so
        that no other worker can have found it stale and given its claims back (queuectl.liveness)."""
        return self._last_beat is not None and now - self._last_beat.mono < self.config["stale-after"] / 2

    def _start(self, job: Job, now: float) -> None:
        """Start a claimed job; its start (its attempt) and process group are recorded by a later exchange,
        except a last attempt's start, recorded first (the module's rules). Raises DatabaseError or
        WorkerGone, having started nothing, if that record fails."""
        timeout = job.timeout if job.timeout is not None else self.config["job-timeout"]
        attempt = job.attempts + 1
        wall = self.clock()  # the start, recorded first or later
        if last_attempt(job.attempts, job.max_retries, self.config):
            # Sent again after a lost reply, the record counts nothing twice (the store's _COUNTS).
            self.store.exchange(self.worker_id, Exchange(running=[Running(job.id, wall)]), self.queues, self.now(),
                                self.config)
        env = self._env.job({"QUEUECTL_JOB_ID": job.id, "QUEUECTL_ATTEMPT": str(attempt),
                             "QUEUECTL_QUEUE": job.queue, "QUEUECTL_WORKER_ID": str(self.worker_id)})
        proc = self.runner.start(job.id, job.command, cwd=job.cwd, timeout=timeout, env=env)
        if job.queue in self.limited:
            self._limited_jobs.add(job.id)
        self.ledger.started(job.id, proc, wall)
        # DEBUG: a line per start would double the log's cost per job; ends are logged at INFO
        log.debug("job %s started (attempt %d): %s", job.id, attempt, one_line(job.command, 80))

    def _stop_cancelled(self, now: float) -> None:
        """Stop the jobs whose cancel was requested: running ones by SIGTERM to the group (SIGKILL after the
        grace), claimed ones not started by giving them back (the store records them cancelled).

        Looked for after each heartbeat and wake-up; a running job is then recorded as cancelled
        by the store (or completed, if it exited 0 first).
        """
        if not self._look_for_cancels or not (self.runner.running or self.reserve):
            return
        self._look_for_cancels = False
        requested = set(self.store.cancel_requests(self.worker_id))
        self._give_back([job for job in self.reserve if job.id in requested])
        for job_id in requested:
            job = self.runner.running.get(job_id)
            if job is not None and job_id not in self._cancelling:
                self._cancelling.add(job_id)
                log.warning("job %s: cancel requested, stopping its process group", job_id)
                job.stop(signal.SIGTERM, self.monotonic(), self.runner.kill_grace)
        self._cancelling &= set(self.runner.running)

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

    # -- heartbeat, outages ------------------------------------------------------------------------

    def _heartbeat(self) -> bool:
        """Write the heartbeat, then ping the watchdog and watch the other workers; return False if this
        worker was declared dead."""
        now = self.now()
        if not self.store.heartbeat(self.worker_id, now):
            self._declared_dead()
            return False
        self.notifier.watchdog()  # after the database took the heartbeat
        self._look_for_cancels = True
        if self._db_failing_since is not None:
            self._grant_grace(now)  # before the watch below: after an outage, every other worker gets its grace
        self._note_gap(now)
        self._listen()
        self._reload_settings()
        self.recovery.sweep(self.worker_id, self.now(), self.config)
        self.stats.recovered = self.recovery.recovered
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

        A wall-clock step (wall delta against monotonic delta) is only logged: liveness, due
        times and rate windows are judged on monotonic clocks (queuectl.store.timing). A heartbeat that came late (a write that
        waited long for a lock, a process stopped or starved) means this worker could not
        watch the others meanwhile: they get stale-after to show a sign of life.
        """
        last, self._last_beat = self._last_beat, now
        if last is None:
            return
        step = (now.wall - last.wall) - (now.mono - last.mono)
        if abs(step) > STEP_TOLERANCE:
            log.warning("the wall clock stepped by %+.1f s since the last heartbeat; liveness, due times and"
                        " rate windows follow the monotonic clock, so no job is affected", step)
        if self.monotonic() - last.mono > 2 * self._beat_interval() + 1:
            self.recovery.watch.writes_resumed(Instant(now.wall, self.monotonic(), now.domain))

    def _database_failed(self, error: DatabaseError | InvalidInput) -> None:
        """Note a failed database operation; log it when it is new, then at most every 30 s.

        Ping the watchdog if the database is unavailable: the loop lives (the module's watchdog rule).
        """
        mono = self.monotonic()
        self._in_doubt = True  # whatever failed, the database may come back as another (a failover): settle
        if self._db_failing_since is None:
            self._db_failing_since, self._grace_given = mono, False
        if isinstance(error, DatabaseUnavailable):
            self.notifier.watchdog()
        message, logged_at = self._db_error_logged
        if str(error) != message or mono - logged_at >= 30:
            held = len(self.runner.running) + len(self.ledger.ended)
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
        self._grant_grace(now)
        self._db_failing_since = None
        self._db_error_logged = (None, 0.0)

    def _grant_grace(self, now: Instant) -> None:
        """Give every other worker stale-after from `now` to beat again, once per outage."""
        if not self._grace_given:
            self.recovery.watch.writes_resumed(now)
            self._grace_given = True

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
                    f" job(s) running and {len(self.ledger.ended)} result(s) held; {self._summary()}")
        if self.stop_requests:
            head = f"draining {len(running)} job(s)"
        elif running:
            head = f"running {len(running)}/{self.slots} job(s)"
        else:
            head = f"idle, {self.slots} slot(s)"
        ids = f": {', '.join(running[:5])}{', ...' if len(running) > 5 else ''}" if running else ""
        return f"{head}{ids}; {self._summary()}"

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
