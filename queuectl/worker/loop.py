"""The worker's loop: one thread that claims jobs, runs them in up to N slots, and does its duties.

The thread sleeps in the runner's select() until a job ends, output arrives, a wake-up comes
(queuectl.worker.wakeups), or a timer (heartbeat, poll, a record's deadline, a duty) is due,
and then `tick(now)` does what is due, in a fixed order: start claimed jobs in free slots;
write the heartbeat and run the heartbeat's duties; on a stop, give back what has not
started; run the duties before the exchange; exchange with the store when a record is due or a
claim is wanted, and start what it claimed; run the periodic duties. The Worker wires the parts and
owns the loop; each part takes what it uses and has its own module and tests: claims in
queuectl.worker.claims, starts in queuectl.worker.starts, records in queuectl.worker.ledger and
queuectl.worker.exchange, the stop in queuectl.worker.drain, outages and the watchdog in
queuectl.worker.outage, heartbeats and STATUS= in queuectl.worker.health, the duties in
queuectl.worker.duties. A job's way: claimed by the exchanger into the claim policy's reserve,
started by the starter, its end taken into the ledger (note_ended), recorded by the exchanger.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from queuectl.host import procs
from queuectl.domain import settings as settings_mod
from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, InvalidInput, QueuectlError
from queuectl.host.notify import Notifier
from queuectl.host.runner import Runner
from queuectl.host.signals import on_stop
from queuectl.store import WorkerGone
from queuectl.store.interface import WorkerStore
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.duties import run_due, wake_at
from queuectl.worker.duties.cancels import Cancels
from queuectl.worker.duties.recovery import Recovery, RecoveryDuty
from queuectl.worker.duties.retention import Retention
from queuectl.worker.duties.schedules import Schedules
from queuectl.worker.drain import Drain
from queuectl.worker.exchange import Exchanger
from queuectl.worker.health import Health, Stats, status_line
from queuectl.worker.ledger import Ledger
from queuectl.worker.output import OUTPUT_EVERY
from queuectl.worker.outage import Outage
from queuectl.worker.starts import Starter
from queuectl.worker.wakeups import Wakeups

log = logging.getLogger("queuectl.worker")

_NAME = re.compile(r"[A-Za-z0-9._:@-]{1,64}")

EXIT_OK = 0
EXIT_LOST = 1  # another worker declared this one dead and took its jobs
EXIT_CONFIG = 78


def default_name() -> str:
    """Return a worker name unique on this host: HOSTNAME-PID."""
    return f"{procs.hostname()}-{os.getpid()}"


def check_name(name: str) -> str:
    """Return `name` if it is a valid worker name; raises InvalidInput."""
    if not _NAME.fullmatch(name):
        raise InvalidInput("worker name must be 1-64 characters of letters, digits and ._:@-")
    return name


@dataclass
class Worker:
    """A worker process bound to one store.

    `slots` jobs run at once; `queues` limits claiming (empty: every queue); `burst` exits once no job is
    ready, waiting for a retry, running here, or held by a dead or stale worker. `clock` gives Unix seconds
    (default: the store's, on PostgreSQL the server's), `monotonic` CLOCK_MONOTONIC seconds (timers, liveness,
    due times: queuectl.domain.clock); `tick` is one turn of the loop, which a test may drive. Raises
    InvalidInput for a bad name or slot count, InvalidConfig for inconsistent settings.
    """

    store: WorkerStore
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
        self.config = settings_mod.consistent(self.store.settings())
        self.runner = Runner(self.config["output-limit"], clock=self.monotonic)
        self.recovery = Recovery(self.store, self.queues)
        self.claims = ClaimPolicy(self.store, self.queues, self.slots)
        self.ledger = Ledger()
        self.outage = Outage(self.notifier, self.recovery.watch, self.monotonic)
        self.exchange = Exchanger(self.store, self.queues, self.ledger, self.runner.running, self.claims, self.outage,
                                  self.stats, self.now)
        self.health = Health(self.notifier, self.recovery.watch, self.monotonic)
        self.wakeups = Wakeups(self.store, self.runner)
        self.drain = Drain(self.store, self.runner, self.ledger, self.claims, self.notifier)
        self.starter = Starter(self.runner, self.claims, self.ledger, self.exchange, self.health, self.outage,
                               self.clock)
        # The duties read the worker's id (set at registration) and settings (reloaded at each beat) when they run.
        worker_id, config = (lambda: self.worker_id), (lambda: self.config)
        self.cancels = Cancels(self.store, worker_id, self.runner, self.claims, self.drain)
        self.at_heartbeat = [RecoveryDuty(self.recovery, worker_id, config, self.now, self.stats)]  # after each beat
        self.before_exchange = [self.cancels]  # their give-backs go with the exchange of the same turn
        self.periodic = [Retention(self.store, worker_id, config, self.now),  # not while draining
                         Schedules(self.store, self.claims, self.now)]
        self.exit_code: int | None = None
        self.wakeups.listen()  # now: a connection that cannot carry wake-ups (a pooler) is refused before any work

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self) -> int:
        """Register, work until stopped (or, with burst, until idle), deregister; return an exit code."""
        with on_stop(self.request_stop) as wake:
            self.wakeups.open(wake, os.getpid())
            self.register()  # the loop's first heartbeat, at once, recovers what dead workers left
            self.notifier.ready(self._status_line())
            code = None
            try:
                code = self._loop(wake)
            finally:
                # Deregister only after a clean stop: a worker declared dead has no row left, and
                # one that crashed leaves its row for recovery to find.
                if code == EXIT_OK and not self.outage.unregistered_stop:
                    try:  # a --burst drain may end before its next heartbeat would have done it
                        self.store.maintain(self.worker_id)
                    except QueuectlError as e:
                        log.warning("housekeeping at exit skipped: %s", e)
                    self.store.deregister(self.worker_id, self.drain.ended(self.stop_requests))
                self.runner.close()
                self.wakeups.close()
        return code

    def request_stop(self, signum: int) -> None:
        """Record a stop request (a signal handler: no I/O here). The second one forces the stop."""
        self.stop_requests += 1

    def register(self) -> None:
        """Register this incarnation; recover at once the jobs a dead predecessor of the same name left. Raises
        Conflict if a live worker already has this name."""
        now = self.now()
        previous = self.recovery.predecessor(self.name, now, self.config["stale-after"])
        info = {"name": self.name, **procs.identity(), "slots": self.slots, "queues": list(self.queues),
                "unit": self.unit}
        self.worker_id, recovered = self.store.register_worker(
            info, now, replace=previous.id if previous else None, config=self.config,
            replace_seen=previous.seen if previous else None)
        self.exchange.worker_id = self.starter.worker_id = self.worker_id
        self.recovery.report(recovered, "its previous incarnation")
        self.stats.recovered = self.recovery.recovered
        log.info("worker %s started: %d slot(s), queues %s", self.name, self.slots,
                 ",".join(self.queues) or "(all)")

    def now(self) -> Instant:
        """Return this worker's clocks now: the wall clock, the monotonic clock and its domain."""
        return Instant(self.clock(), self.monotonic(), procs.clock_domain())

    # -- the loop ----------------------------------------------------------------------------------

    def _loop(self, wake) -> int:
        announced = 0
        while True:
            if self.stop_requests > announced:
                announced = self.drain.announce(self.stop_requests, announced)
            wait = self.tick()
            if wait is None:
                if self.stop_requests > announced:  # a signal during the last turn: it still says STOPPING=1
                    self.drain.announce(self.stop_requests, announced)
                return self.exit_code
            if self.notifier.enabled:
                self.notifier.status(self._status_line())
            finished, woken = self.runner.wait(wait)
            if woken:  # a signal, a poke or a notification: drain them; look for cancels and claims at once
                self.wakeups.take(wake)
                self.cancels.requested()
                self.claims.claim_now()
            self.note_ended(finished)

    def note_ended(self, finished, now: float | None = None) -> None:
        """Take the runner's ended jobs ([(job id, RunResult)]) into the ledger, ended at monotonic `now`."""
        if finished:
            wall, mono = self.clock(), self.monotonic() if now is None else now
            for key, result in finished:
                self.ledger.ended.append((key, result, wall, mono))
                self.claims.ended(key, result.duration)

    def tick(self, now: float | None = None) -> float | None:
        """Do what is due at monotonic time `now` (default: the monotonic clock now); return the seconds
        until something is due next (the loop waits that long for a job's end, output or a wake-up),
        or None when the worker is done (`exit_code` says how).

        In order (the module's): start claimed jobs in free slots; write the heartbeat and run the
        heartbeat's duties when due; on a stop, give back what has not started; run the duties
        before the exchange; give back the reserve held behind long jobs; exchange with the store
        when a record is due or a claim is wanted, and start what it claimed; unless draining, run
        the periodic duties. A database error keeps everything in memory and tries again DB_RETRY
        seconds later (queuectl.worker.outage).
        """
        now = self.monotonic() if now is None else now
        wait = self.outage.waiting(now)
        if wait is not None:
            return wait  # jobs run on and their output is read meanwhile
        try:
            self._start_reserved(now)
            if self.health.beat_due(now, bool(self.claims.reserve), self.config):
                if not self._heartbeat():
                    self.exit_code = EXIT_LOST
                    return None
                self.health.beaten(now, self.config)
                self._start_reserved(now)
            stopping = self.stop_requests > 0
            if stopping:
                self.drain.begin(self.worker_id, self.now)
                self.drain.say(now)
            run_due(self.before_exchange, now)
            self.drain.give_back(self.claims.held_back(now, self.runner.running))
            claim = self.claims.wanted(now, len(self.runner.running), stopping)
            if claim or now >= self.exchange.due(now, stopping):
                self.exchange.run(now, claim, self.config)
                self.outage.works(self.now)  # the held results are in: claimed jobs may start again
                self._start_reserved(now)
            if not stopping:
                run_due(self.periodic, now)
            self.outage.works(self.now)
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
            # (queuectl.worker.outage's watchdog rule).
            self.outage.failed(e, len(self.runner.running) + len(self.ledger.ended))
            if self.stop_requests and not self.runner.running and not self.ledger.ended:
                self.outage.stop_unregistered(self.name, self.stats.summary())
                self.exit_code = EXIT_OK
                return None
            return self.outage.retry_later()

    def _start_reserved(self, now: float) -> None:
        """Start claimed jobs in the free slots (queuectl.worker.starts)."""
        self.starter.start_reserved(now, self.config, self.stop_requests > 0)

    def _next_due(self, now: float, stopping: bool) -> float:
        """Return seconds until the next thing due: the heartbeat, a record's deadline, a claim, a reserve's
        release, a duty."""
        due = min(self.health.next_beat, self.exchange.due(now, stopping),
                  self.claims.next_due(now, self.runner.running, stopping))
        if self.runner.running:  # output read meanwhile does not end the wait: look at it again then
            due = min(due, now + OUTPUT_EVERY)
        if not stopping:
            due = min(due, wake_at(self.periodic))
        return max(0.0, due - now)

    def _done(self, stopping: bool) -> bool:
        """Return True (with `exit_code` set) when the worker has stopped or, with burst, has run out of work."""
        if self.runner.running or self.claims.reserve or self.ledger:
            return False
        if stopping:
            log.info("worker %s stopped: %s", self.name, self.stats.summary())
        elif not (self.burst and not self.recovery.held and not self.store.has_work(self.queues, self.now())):
            return False
        else:
            log.info("worker %s: no more work (burst): %s", self.name, self.stats.summary())
        self.exit_code = EXIT_OK
        return True

    def _heartbeat(self) -> bool:
        """Write the heartbeat, then ping the watchdog and run the heartbeat's duties; return False if this
        worker was declared dead."""
        now = self.now()
        if not self.store.heartbeat(self.worker_id, now):
            self._declared_dead()
            return False
        self.notifier.watchdog()  # after the database took the heartbeat
        self.cancels.requested()
        self.outage.beat(now)
        self.health.note_gap(now, self.config)
        self.wakeups.listen()
        self._reload_settings()
        run_due(self.at_heartbeat, now.mono)
        self.store.maintain(self.worker_id)
        return True

    def _declared_dead(self) -> int:
        log.error("worker %s was declared dead by another worker and its jobs were recovered; exiting",
                  self.name)
        self.runner.stop_all(signal.SIGKILL)
        return EXIT_LOST

    def _status_line(self) -> str:
        """Return one line for systemd's STATUS=: idle, the running jobs or the database's outage; the counts so far."""
        running = list(self.runner.running)
        if self.outage.failing_since is not None:
            return f"{self.outage.status(len(running), len(self.ledger.ended))}; {self.stats.summary()}"
        return status_line(running, self.slots, bool(self.stop_requests), self.stats.summary())

    def _reload_settings(self) -> None:
        try:
            self.config = settings_mod.consistent(self.store.settings())
        except QueuectlError as e:
            log.error("keeping the previous settings: %s", e)
        self.runner.output_limit = self.config["output-limit"]
