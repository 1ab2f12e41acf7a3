"""Starting claimed jobs: from the reserve into the free slots, each under /bin/sh in a session of its own
(queuectl.host.runner) with its environment (QUEUECTL_JOB_ID, QUEUECTL_ATTEMPT, QUEUECTL_QUEUE,
QUEUECTL_WORKER_ID, QUEUECTL_WORKER_PID).

No job starts while the database fails, nor while the last heartbeat is older than stale-after / 2
(queuectl.worker.health: a worker cut off from the database may be judged stale and its jobs recovered
elsewhere), nor once a stop was requested. A job's start is recorded by a later exchange, except a last
attempt's, recorded first (queuectl.worker.exchange).
"""

from __future__ import annotations

import logging
import os
from typing import Callable

from queuectl.domain.backoff import last_attempt, retry_limit
from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import Job, one_line
from queuectl.host.runner import JobEnvironment, Runner
from queuectl.store import WorkerGone
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.exchange import Exchanger
from queuectl.worker.health import Health
from queuectl.worker.ledger import Ledger
from queuectl.worker.outage import Outage

log = logging.getLogger("queuectl.worker")


class Starter:
    """Starts the reserve's jobs in free slots of `runner`, from the parts that say whether and how: the claim
    policy (its reserve and slots), the health (a fresh heartbeat), the outage (no database failing), the
    exchanger (a last attempt's start recorded first; each start's attempt noted) and the ledger (the start
    recorded later). `clock` gives the wall clock (Unix seconds) a start is recorded at; `worker_id` is the
    registered worker's, set at registration."""

    def __init__(self, runner: Runner, claims: ClaimPolicy, ledger: Ledger, exchange: Exchanger, health: Health,
                 outage: Outage, clock: Callable[[], float]):
        self.runner, self.claims, self.ledger, self.exchange = runner, claims, ledger, exchange
        self.health, self.outage, self.clock = health, outage, clock
        self.worker_id: int | None = None
        self._env = JobEnvironment()

    def start_reserved(self, now: float, config: dict, stopping: bool) -> None:
        """Start claimed jobs in the free slots at monotonic `now`, with the settings in force (`config`).

        Raises DatabaseError or WorkerGone when a last attempt's start cannot be recorded first: that job goes
        back to the head of the reserve, not started.
        """
        if not self.health.fresh(now, config):
            return
        reserve = self.claims.reserve
        while reserve and len(self.runner.running) < self.claims.slots and self.outage.failing_since is None \
                and not stopping:
            job = reserve.popleft()
            try:
                self.start(job, config)
            except (DatabaseError, WorkerGone):  # its start could not be recorded first: it did not start
                reserve.appendleft(job)
                raise

    def start(self, job: Job, config: dict) -> None:
        """Start a claimed job (its timeout, or the job-timeout setting); its start (its attempt) and process group
        are recorded by a later exchange, except a last attempt's start, recorded first. Raises DatabaseError or
        WorkerGone, having started nothing, if that record fails."""
        timeout = job.timeout if job.timeout is not None else config["job-timeout"]
        attempt = job.attempts + 1
        wall = self.clock()  # the start, recorded first or later
        if last_attempt(job.attempts, job.max_retries, config):
            self.exchange.record_start(job.id, wall, config)
        env = self._env.job({"QUEUECTL_JOB_ID": job.id, "QUEUECTL_ATTEMPT": str(attempt),
                             "QUEUECTL_QUEUE": job.queue, "QUEUECTL_WORKER_ID": str(self.worker_id),
                             "QUEUECTL_WORKER_PID": str(os.getpid())})  # as registered
        proc = self.runner.start(job.id, job.command, cwd=job.cwd, timeout=timeout, env=env)
        self.claims.started(job)
        self.exchange.started(job.id, attempt, retry_limit(job.max_retries, config))
        self.ledger.started(job.id, proc, wall)
        # DEBUG: a line per start would double the log's cost per job; ends are logged at INFO
        log.debug("job %s started (attempt %d): %s", job.id, attempt, one_line(job.command, 80))
