"""The ledger: what a worker knows and the store does not yet (starts, process groups, ends, give-backs).

The rules of records (the exchange sends them, queuectl.worker.exchange): an end is recorded
at once, unless the worker is busy with short jobs; then within RECORD_WITHIN seconds (with
the ends that come meanwhile). A start is recorded with the next exchange, at the latest
RECORD_AFTER seconds after it, together with the job's process group (a job that ends sooner
has its start recorded with its end, and its group never).
"""

from __future__ import annotations

from queuectl.store.request import Exchange, Outcome, Running
from queuectl.worker.output import output_to_record

#: Seconds a job runs before its start and process group must be recorded (for recovery).
RECORD_AFTER = 0.02
#: Seconds an end may wait to be recorded with the ends that follow, while the worker runs short jobs.
RECORD_WITHIN = 0.01


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
        """Return the monotonic time by which the next exchange must record what is here (inf: nothing to record)."""
        due = float("inf")
        if self.release:
            return mono
        if self.ended:
            due = self.ended[0][3] + RECORD_WITHIN if batching else mono
        if self.groups:
            due = min(due, min(p.started for p in self.groups.values()) + RECORD_AFTER)
        return due

    def batch(self, running: dict, mono: float, claim: int, free: int | None = None) -> Exchange:
        """Return the Exchange that records everything here (groups of jobs that ran RECORD_AFTER or more) and
        claims `claim` (`free` of them for free slots: see Exchange.free)."""
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
        return Exchange(entries, ended, requeue, list(self.release), claim, output_to_record(running, mono), free)

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

    def known(self) -> set[str]:
        """Return the ids of the jobs this ledger holds ended or to give back."""
        return {*self.release, *(key for key, _, _, _ in self.ended)}
