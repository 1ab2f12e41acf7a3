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

from queuectl.domain.backoff import backoff_delay, retry_text
from queuectl.domain.errors import DatabaseError, NotFound
from queuectl.domain.models import JobState, printable
from queuectl.host.runner import RunResult
from queuectl.store import Exchange, Outcome, Running
from queuectl.worker.output import next_output_due, output_recorded

log = logging.getLogger("queuectl.worker")

#: The error of a job this worker started whose recorded end the database no longer has (it went back in
#: time: a failover to a standby that had not received it, a restore), found after a database error.
RUN_LOST = "run lost: the database has it running here, and it is not (its recorded end was lost)"


class Exchanger:
    """The worker's one writer on the hot path: hands the ledger to the store and takes claims back.

    `worker` is the Worker it serves: its store, worker_id, queues, config, clocks, runner,
    ledger, claim policy (`claims`), outage (`outage`) and stats.
    """

    def __init__(self, worker):
        self.worker = worker
        self.attempts: dict[str, tuple[int, int]] = {}  # job id -> (its attempt running here, its retries)

    def started(self, job_id: str, attempt: int, retries: int) -> None:
        """Note that attempt `attempt` of a job with `retries` retries started here (for the line of its end)."""
        self.attempts[job_id] = (attempt, retries)

    def batching(self) -> bool:
        """Return True while ends may wait RECORD_WITHIN for the ends that follow: short jobs keep the slots busy."""
        w = self.worker
        return w.claims.short and bool(w.runner.running) and not w.stop_requests

    def due(self, now: float) -> float:
        """Return the monotonic time by which the next exchange must record what the ledger holds or new output."""
        w = self.worker
        return min(w.ledger.due(now, self.batching()), next_output_due(w.runner.running))

    def run(self, now: float, claim: int) -> None:
        """Record what the ledger holds and claim `claim` jobs into the reserve, in one transaction, at monotonic `now`.

        On a database error everything stays in the ledger for the next try; raises DatabaseError.
        """
        w = self.worker
        if w.outage.in_doubt:
            self.settle()
        ex = w.ledger.batch(w.runner.running, now, claim,
                            free=max(0, w.slots - len(w.runner.running) - len(w.claims.reserve)))
        at = w.now()
        try:
            states, jobs, limited = w.store.exchange(w.worker_id, ex, w.queues, at, w.config)
        except DatabaseError:
            w.outage.in_doubt = True  # it may have committed, its reply lost: claims this worker never saw
            raise
        if w.outage.in_doubt:
            states = [self._recorded_before(o) if state is None else state for o, state in zip(ex.ended, states)]
            w.outage.in_doubt = False
        w.ledger.recorded(ex)
        output_recorded(w.runner.running, ex.output, now)
        for key in ex.requeue:
            self.attempts.pop(key, None)
            log.warning("job %s stopped and put back to pending (cancelled instead if a cancel of it was requested)",
                        key)
        for key in ex.release:
            log.debug("job %s given back unstarted", key)
        for outcome, state in zip(ex.ended, states):
            self._report(outcome, state)
        w.claims.claimed(jobs, claim, now, at, w.config["poll-interval"], limited)

    def record_start(self, job_id: str, wall: float) -> None:
        """Record a start at `wall` before the job runs (a last attempt's); raises DatabaseError or WorkerGone.

        Sent again after a lost reply, the record counts nothing twice (fragments.counted).
        """
        w = self.worker
        w.store.exchange(w.worker_id, Exchange(running=[Running(job_id, wall)]), w.queues, w.now(), w.config)

    def settle(self) -> None:
        """After an exchange whose commit is unknown, or any failed database operation: settle the jobs the
        store says this worker holds and it knows nothing of. One never started (claimed by an exchange whose
        reply was lost) is given back. One whose start is recorded ran here and its recorded end is gone: the
        database went back in time (a failover to a standby that had not received it, a restore), so it ends
        failed with RUN_LOST and follows the retry rule, as a job whose worker was lost does (else it would
        stay processing for as long as this worker lives)."""
        w = self.worker
        known = {*w.runner.running, *(j.id for j in w.claims.reserve), *w.ledger.known()}
        for j in w.store.worker_jobs(w.worker_id):
            if j.job_id in known:
                continue
            if not j.started:
                log.info("job %s was claimed by an exchange whose reply was lost: giving it back", j.job_id)
                w.ledger.release.append(j.job_id)
            else:
                log.warning("job %s: %s; it ends failed", j.job_id, RUN_LOST)
                w.ledger.ended.append((j.job_id, RunResult(None, RUN_LOST, b"", b"", 0.0), w.clock(),
                                       w.monotonic()))

    def _recorded_before(self, outcome: Outcome):
        """Return the state of a job whose end the store no longer takes from this worker: recorded by an exchange
        whose reply was lost (its end time is the one this worker sent), or None: recovered elsewhere."""
        try:
            job = self.worker.store.get_job(outcome.job_id)
        except NotFound:
            return None
        return job.state if job.worker_id is None and job.finished_at == outcome.ended_at else None

    def _report(self, outcome: Outcome, state) -> None:
        """Log how a recorded job ended, its outcome said once ("retry 2/3 in 4 s (exit code 3)", "dead: exit
        code 3 (attempt 4 of 4)"), and count it in the worker's stats."""
        stats = self.worker.stats
        attempt = self.attempts.pop(outcome.job_id, None)
        if state is None:
            log.warning("job %s was taken from this worker (recovered elsewhere); its result is dropped",
                        outcome.job_id)
        elif state == JobState.CANCELLED:
            log.warning("job %s cancelled (%s)", outcome.job_id, outcome.error or "it had ended")
        elif outcome.ok:
            stats.done += 1
            log.info("job %s completed", outcome.job_id)
        else:
            stats.failed += 1
            log.warning("job %s: %s", outcome.job_id, self._failure(outcome, state, attempt))

    def _failure(self, outcome: Outcome, state, attempt: tuple[int, int] | None) -> str:
        """The outcome of a failed attempt (`attempt`: its number and the job's retries; None: not started here)
        once recorded in `state`: a retry after its backoff (the store's rule, from the settings in force), or dead."""
        error = printable(outcome.error or "failed")
        if state == JobState.FAILED and attempt is not None:
            config = self.worker.config
            delay = backoff_delay(attempt[0], config["backoff-base"], config["backoff-max"])
            return f"{retry_text(*attempt, delay)} ({error})"
        if state == JobState.DEAD and attempt is not None:
            return f"dead: {error} (attempt {attempt[0]} of {attempt[1] + 1})"
        return f"{'retry scheduled' if state == JobState.FAILED else state.value}: {error}"
