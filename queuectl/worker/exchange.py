"""The exchange: a worker's writes batched into one transaction per round trip (queuectl.store.base.Exchange).

Each exchange records every start, process group and end since the last one (the ledger,
queuectl.worker.ledger, says when it is due), gives back what the worker will not run, and
claims as many jobs as the claim policy asks (queuectl.worker.claims). A job's last attempt
(queuectl.domain.backoff.last_attempt) has its start recorded before it runs, one exchange of its own.

A crash between a job's exit and its record re-runs it (at least once): the window is
RECORD_WITHIN seconds while the worker batches, the exchange's own time otherwise. A crash
before a start is recorded (RECORD_AFTER at most) counts the attempt all the same, for the
job may have run (a job that kills its worker at once must still reach the dead letter
queue): so do the jobs claimed ahead and not started, except one whose next run is its last
attempt, which goes back uncounted, since it cannot have started unrecorded. A job thus runs
at most max_retries + 1 times however its worker dies; a worker's death may cost the jobs it
held in reserve one retry each, never their last. An exchange whose commit is unknown (its
reply lost) is settled at the next one (`Exchanger.settle`).
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from queuectl.domain.backoff import retry_text
from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, NotFound
from queuectl.domain.models import JobState, printable
from queuectl.host.runner import RunResult
from queuectl.store.request import Exchange, Outcome, Running
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.health import Stats
from queuectl.worker.ledger import Ledger
from queuectl.worker.outage import Outage
from queuectl.worker.output import next_output_due, output_recorded

log = logging.getLogger("queuectl.worker")

#: The error of a job this worker started whose recorded end the database no longer has (it went back in
#: time: a failover to a standby that had not received it, a restore), found after a database error.
RUN_LOST = "run lost: the database has it running here, and it is not (its recorded end was lost)"


class Exchanger:
    """The worker's one writer on the hot path: hands the ledger to the store and takes claims back.

    It takes what it uses: the store and the queues it claims from; the worker's parts it records from and
    claims for (the ledger, the runner's running jobs by id, the claim policy); the outage, whose `in_doubt`
    says an exchange's commit is unknown; the stats it counts ends in; and `now`, the worker's clocks (a
    queuectl.domain.clock.Instant). `worker_id` is the registered worker's, set at registration.
    """

    def __init__(self, store, queues: Sequence[str], ledger: Ledger, running: dict, claims: ClaimPolicy,
                 outage: Outage, stats: Stats, now: Callable[[], Instant]):
        self.store, self.queues, self.ledger, self.running, self.claims = store, queues, ledger, running, claims
        self.outage, self.stats, self.now = outage, stats, now
        self.worker_id: int | None = None
        self.attempts: dict[str, tuple[int, int]] = {}  # job id -> (its attempt running here, its retries)

    def started(self, job_id: str, attempt: int, retries: int) -> None:
        """Note that attempt `attempt` of a job with `retries` retries started here (for the line of its end)."""
        self.attempts[job_id] = (attempt, retries)

    def batching(self, stopping: bool) -> bool:
        """Return True while ends may wait RECORD_WITHIN for the ends that follow: short jobs keep the slots
        busy, and no stop was requested."""
        return self.claims.short and bool(self.running) and not stopping

    def due(self, now: float, stopping: bool) -> float:
        """Return the monotonic time by which the next exchange must record what the ledger holds or new output."""
        return min(self.ledger.due(now, self.batching(stopping)), next_output_due(self.running))

    def run(self, now: float, claim: int, config: dict) -> None:
        """Record what the ledger holds and claim `claim` jobs into the reserve, in one transaction, at monotonic
        `now`, with the settings in force (`config`).

        On a database error everything stays in the ledger for the next try; raises DatabaseError.
        """
        if self.outage.in_doubt:
            self.settle()
        claims = self.claims
        ex = self.ledger.batch(self.running, now, claim,
                               free=max(0, claims.slots - len(self.running) - len(claims.reserve)))
        at = self.now()
        try:
            done = self.store.exchange(self.worker_id, ex, self.queues, at, config)
        except DatabaseError:
            self.outage.in_doubt = True  # it may have committed, its reply lost: claims this worker never saw
            raise
        states = done.states
        if self.outage.in_doubt:
            states = [self._recorded_before(o) if state is None else state for o, state in zip(ex.ended, states)]
            self.outage.in_doubt = False
        self.ledger.recorded(ex)
        output_recorded(self.running, ex.output, now)
        for key in ex.requeue:
            self.attempts.pop(key, None)
            log.warning("job %s stopped and put back to pending (cancelled instead if a cancel of it was requested)",
                        key)
        for key in ex.release:
            log.debug("job %s given back unstarted", key)
        for outcome, state in zip(ex.ended, states):
            self._report(outcome, state, (done.retry_in or {}).get(outcome.job_id))
        claims.claimed(done.jobs, claim, now, at, config["poll-interval"], done.limited)

    def record_start(self, job_id: str, wall: float, config: dict) -> None:
        """Record a start at `wall` before the job runs (a last attempt's); raises DatabaseError or WorkerGone.

        Sent again after a lost reply, the record counts nothing twice (fragments.counted).
        """
        self.store.exchange(self.worker_id, Exchange(running=[Running(job_id, wall)]), self.queues, self.now(),
                            config)

    def settle(self) -> None:
        """After an exchange whose commit is unknown, or any failed database operation: settle the jobs the
        store says this worker holds and it knows nothing of. One never started (claimed by an exchange whose
        reply was lost) is given back. One whose start is recorded ran here and its recorded end is gone: the
        database went back in time (a failover to a standby that had not received it, a restore), so it ends
        failed with RUN_LOST and follows the retry rule, as a job whose worker was lost does (else it would
        stay processing for as long as this worker lives)."""
        known = {*self.running, *(j.id for j in self.claims.reserve), *self.ledger.known()}
        for j in self.store.worker_jobs(self.worker_id):
            if j.job_id in known:
                continue
            if not j.started:
                log.info("job %s was claimed by an exchange whose reply was lost: giving it back", j.job_id)
                self.ledger.release.append(j.job_id)
            else:
                log.warning("job %s: %s; it ends failed", j.job_id, RUN_LOST)
                at = self.now()
                self.ledger.ended.append((j.job_id, RunResult(None, RUN_LOST, b"", b"", 0.0), at.wall, at.mono))

    def _recorded_before(self, outcome: Outcome):
        """Return the state of a job whose end the store no longer takes from this worker: recorded by an exchange
        whose reply was lost (its end time is the one this worker sent), or None: recovered elsewhere."""
        try:
            job = self.store.get_job(outcome.job_id)
        except NotFound:
            return None
        return job.state if job.worker_id is None and job.finished_at == outcome.ended_at else None

    def _report(self, outcome: Outcome, state, retry_in: float | None) -> None:
        """Log how a recorded job ended, its outcome said once ("retry 2/3 in 4 s (exit code 3)", "dead: exit
        code 3 (attempt 4 of 4)"), and count it in the stats. `retry_in`: the backoff the store chose for it."""
        attempt = self.attempts.pop(outcome.job_id, None)
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
            log.warning("job %s: %s", outcome.job_id, _failure(outcome, state, attempt, retry_in))


def _failure(outcome: Outcome, state, attempt: tuple[int, int] | None, retry_in: float | None) -> str:
    """The outcome of a failed attempt (`attempt`: its number and the job's retries; None: not started here)
    once recorded in `state`: a retry after `retry_in` seconds (the store's choice), or dead."""
    error = printable(outcome.error or "failed")
    if state == JobState.FAILED and attempt is not None and retry_in is not None:
        return f"{retry_text(*attempt, retry_in)} ({error})"
    if state == JobState.DEAD and attempt is not None:
        return f"dead: {error} (attempt {attempt[0]} of {attempt[1] + 1})"
    return f"{'retry scheduled' if state == JobState.FAILED else state.value}: {error}"
