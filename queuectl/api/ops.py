"""Operator actions on jobs and queues: cancel (and its wait for running jobs to stop), retry, dead
letter queue retry, pause and resume, purge."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Iterator, Sequence

from queuectl.api.outage import Patience
from queuectl.api.waiting import wait_for_stop
from queuectl.domain.errors import Conflict, InvalidInput, NotFound
from queuectl.domain.jobspec import check_queue
from queuectl.domain.models import Job, JobState
from queuectl.domain.settings import RETENTION, kept_ages, parse_duration
from queuectl.store import PURGE_BATCH, CancelResult
from queuectl.store.jobfilter import JobFilter

#: The states `cancel` takes jobs from, and those it picks by default when it chooses by queue or state.
CANCELLABLE = (JobState.PENDING, JobState.BLOCKED, JobState.FAILED, JobState.PROCESSING)
#: The finished states `purge` deletes (each kept by its keep-* setting: queuectl.domain.settings.RETENTION).
PURGEABLE = (JobState.COMPLETED, JobState.CANCELLED, JobState.DEAD)
#: Seconds `cancel` waits by default for running jobs to be stopped.
CANCEL_WAIT = 10.0


@dataclass(frozen=True)
class Cancelled:
    """What a cancel did to one job: its state before (`was`; None: no such job) and after (`state`: a
    running one's once stopped, or still "processing" if its worker had not stopped it in time), its
    worker if it was running, and why it could not be cancelled (`error`; None if it was)."""

    id: str
    was: str | None
    state: str | None
    worker: str | None
    error: str | None

    def to_dict(self) -> dict:
        """Return the result as `cancel --json` prints it."""
        return {"id": self.id, "was": self.was, "state": self.state, "worker": self.worker, "error": self.error}

    @property
    def description(self) -> str:
        """What happened, in words ("cancelled", "stopped and cancelled", ...)."""
        if self.was != "processing":
            return "cancelled"
        return {"cancelled": "stopped and cancelled",
                "completed": "completed before the cancel took effect",
                "processing": f"cancel requested; worker {self.worker} is stopping it"}.get(self.state, self.state)


def cancel(store, patience, job_ids: Sequence[str] = (), queue: str | None = None,
           states: Sequence[JobState] = (), wait: float = CANCEL_WAIT) -> list[Cancelled]:
    """Cancel jobs by id, or those of `queue` and/or in `states` (default: every CANCELLABLE state), as a
    bulk cancel does (cancel_walk: BULK_BATCH jobs per store call, newest first), reported oldest first.

    Pending, blocked and failed jobs are cancelled at once, with their dependants; a running
    one's worker is asked to stop it, and this waits up to `wait` seconds for that (reads
    through `patience`, queuectl.api.outage.Patience; DatabaseUnavailable when it gives up; the
    cancel stays requested). Unknown ids and jobs in other states come back with an `error`.
    Raises InvalidInput for ids with a queue or states, or for neither; NotFound for a job
    deleted while waited for.
    """
    if job_ids and (queue or states):
        raise InvalidInput("give job ids, or --queue/--state, not both")
    if not job_ids and not queue and not states:
        raise InvalidInput("give the ids of the jobs to cancel, or --queue and/or --state")
    if job_ids:
        results = store.cancel(list(dict.fromkeys(job_ids)), store.now())
    else:
        queue = check_queue(queue) if queue else None
        filters = [JobFilter(state=state, queue=queue) for state in dict.fromkeys(states or CANCELLABLE)]
        results = [r for _, r in sorted(cancel_walk(store, filters), key=lambda done: done[0].seq)]
    requested = [r.job_id for r in results if r.result == "requested"]
    stopped = wait_for_stop(store, requested, patience, wait) if requested else {}
    report = []
    for r in results:
        was = r.state.value if r.state else None
        if r.result == "requested":
            state = stopped[r.job_id].state.value
        else:
            state = "cancelled" if r.result == "cancelled" else was
        report.append(Cancelled(r.job_id, was, state, r.worker, r.message))
    return report


def cancel_now(store, job_id: str) -> Cancelled:
    """Cancel job `job_id` without waiting for a running one to stop (its worker is asked to), reading once:
    what a live view's key or button does. An outage fails it at once (DatabaseUnavailable)."""
    return cancel(store, Patience(lambda line: None, limit=0), [job_id], wait=0)[0]


def retry(store, job_ids: Sequence[str]) -> list[JobState]:
    """Move dead or cancelled jobs back to pending (blocked if after unfinished jobs), attempts reset to 0,
    all or none; return each one's new state. Raises NotFound and Conflict (see Store.retry)."""
    return store.retry(list(job_ids), store.now())


def dlq_retry(store, job_ids: Sequence[str]) -> list[JobState]:
    """Move dead jobs (the dead letter queue) back to pending, attempts reset to 0, all or none; return
    each one's new state. Raises NotFound and Conflict (see Store.dlq_retry)."""
    return store.dlq_retry(list(job_ids), store.now())


def set_paused(store, queues: Sequence[str], paused: bool) -> list[tuple[str, bool]]:
    """Pause (workers claim none of their jobs) or resume queues; return (queue, whether it changed) for
    each queue named once. Kept in the database until changed. Raises InvalidInput for a bad name."""
    names = [check_queue(q) for q in dict.fromkeys(queues)]
    return list(zip(names, store.set_paused(names, paused, store.now())))


def said_paused(what: str, name: str, paused: bool, changed: bool) -> str:
    """Say for a person what pausing (`paused`) or resuming `what` ("queue", "schedule") `name` did, as
    set_paused (or queuectl.api.schedules.set_paused) returned `changed`: "queue build paused", "queue
    build was already running"."""
    if changed:
        return f"{what} {name} {'paused' if paused else 'resumed'}"
    return f"{what} {name} was already {'paused' if paused else 'running'}"


@dataclass(frozen=True)
class Purged:
    """What a purge did: the jobs deleted (or that would be, with `dry_run`) and what compaction said
    (None: nothing to say; a note starting "not compacted" is a warning)."""

    removed: int
    dry_run: bool = False
    compacted: str | None = None


def purge(store, states: Sequence[str] = (), older_than: str | None = None, queue: str | None = None,
          dry_run: bool = False) -> Purged:
    """Delete finished jobs and their output now, as retention does, and give the space back.

    `states`: of PURGEABLE (default: all); `older_than`: a duration since they finished (90s, 12h,
    7d; "0" for all; default: each state's keep-* setting, none for a state kept forever). Goes in
    batches of queuectl.store.PURGE_BATCH jobs (short transactions that let workers go on).
    Raises InvalidInput for a bad queue, state or duration (and "forever").
    """
    queue = check_queue(queue) if queue else None
    chosen = list(dict.fromkeys(states)) or list(RETENTION)
    bad = [s for s in chosen if s not in RETENTION]
    if bad:
        raise InvalidInput(f"cannot purge {bad[0]} jobs: only {', '.join(RETENTION)} ones")
    if older_than is not None:
        age = parse_duration(older_than, "--older-than", forever=False)
        if age is None:
            raise InvalidInput("--older-than forever would delete nothing; give a duration such as 7d")
        ages = dict.fromkeys(chosen, age)
    else:
        ages = kept_ages(store.settings(), chosen)
    now = store.now()
    if dry_run:
        return Purged(store.count_purgeable(ages, now, queue), dry_run=True)
    removed = 0
    while ages:
        n = store.purge(ages, now, queue)
        removed += n
        if n < PURGE_BATCH:
            break
    return Purged(removed, compacted=store.compact())


#: How many jobs a bulk action reads and changes at a time (one store call, one transaction, each).
BULK_BATCH = 500
#: How many refusals a Bulk names (the others are counted).
BULK_REASONS = 5


@dataclass(frozen=True)
class Bulk:
    """What a bulk action did to the jobs its filter matched: `matched` jobs read, of which `changed` were
    cancelled or retried, `requested` (cancel) running ones whose worker was asked to stop them, and `skipped`
    left as they were (their state did not allow it, or a rule refused it); `reasons`: the first
    BULK_REASONS refusals, each one line naming its job (user data: escape before printing)."""

    matched: int
    changed: int
    requested: int
    skipped: int
    reasons: tuple[str, ...] = ()


def bulk_filter(job_filter):
    """Return `job_filter` (a queuectl.store.jobfilter.JobFilter), refusing one with no field (InvalidInput)."""
    if job_filter.empty():
        raise InvalidInput("a bulk action needs a filter: give a state, queue, key, dependency, text or id prefix")
    return job_filter


def _matching(store, job_filter, batch: int):
    """Yield the jobs `job_filter` matches in lists of up to `batch`, newest first, keyset by seq: the first read
    bounds them (jobs enqueued later have higher seqs and are never read), and no job is read twice."""
    before = None
    while True:
        jobs = store.find_jobs(job_filter, before, batch)
        if jobs:
            yield jobs
        if len(jobs) < batch:
            return
        before = jobs[-1].seq


def cancel_walk(store, filters: Sequence[JobFilter], batch: int = BULK_BATCH) -> Iterator[tuple[Job, CancelResult]]:
    """Cancel every job that one of `filters` matches, `batch` jobs per store call (Store.cancel's rules), newest
    first across them; yield each job as read with what its cancel did. The one bulk cancel: `cancel` by queue
    and states, and cancel_matching.

    Newest first, a dependant is cancelled before its dependencies (whose cancel would cancel it with them), so
    each job matched is reported. Jobs enqueued after it began are not touched; each batch is its own
    transaction.
    """
    walks = [(job for jobs in _matching(store, f, batch) for job in jobs) for f in filters]
    merged = heapq.merge(*walks, key=lambda job: -job.seq)
    while jobs := list(itertools.islice(merged, batch)):
        yield from zip(jobs, store.cancel([j.id for j in jobs], store.now()))


def cancel_matching(store, job_filter, batch: int = BULK_BATCH) -> Bulk:
    """Cancel every job `job_filter` matches (a queuectl.store.jobfilter.JobFilter, checked by
    queuectl.api.search.job_filter), BULK_BATCH jobs per store call, newest first; return what it did.

    The rules are `cancel`'s (Store.cancel): pending, blocked and failed jobs are cancelled with their dependants
    (which may not match the filter); a running one's worker is asked to stop it (not waited for); completed,
    dead and cancelled jobs are skipped. Jobs enqueued after it began are not touched. Raises InvalidInput for
    a filter with no field (nobody cancels every job by an empty form).
    """
    matched = changed = requested = 0
    reasons: list[str] = []
    for _, r in cancel_walk(store, [bulk_filter(job_filter)], batch):
        matched += 1
        changed += r.result == "cancelled"
        requested += r.result == "requested"
        if r.result == "error" and len(reasons) < BULK_REASONS:
            reasons.append(r.message)
    return Bulk(matched, changed, requested, matched - changed - requested, tuple(reasons))


def retry_matching(store, job_filter, batch: int = BULK_BATCH) -> Bulk:
    """Retry every dead or cancelled job `job_filter` matches (as bulk_filter and cancel_matching take it),
    BULK_BATCH jobs per store call, newest first; return what it did.

    The rules are `retry`'s (Store.retry): each goes back to pending (blocked while a dependency has not
    completed), attempts reset to 0. Jobs in other states are skipped; so is a job whose key another job holds,
    or whose dependency is dead or cancelled once every matched job was retried: a batch the store refuses is
    retried job by job, and each job refused then is tried once more at the end, oldest first (after its
    dependencies, which come in later batches). Jobs enqueued after it began are not touched. Raises
    InvalidInput for a filter with no field.
    """
    job_filter = bulk_filter(job_filter)
    matched = changed = 0
    reasons: list[str] = []
    later: list[tuple[int, str]] = []  # (seq, id) of jobs refused job by job, tried once more at the end

    def one_by_one(ids: list[tuple[int, str]], last: bool) -> int:
        done = 0
        for seq, job_id in ids:
            try:
                store.retry([job_id], store.now())
                done += 1
            except (Conflict, NotFound) as e:
                if not last:
                    later.append((seq, job_id))
                elif len(reasons) < BULK_REASONS:
                    reasons.append(str(e))
        return done

    for jobs in _matching(store, job_filter, batch):
        matched += len(jobs)
        chosen = [(j.seq, j.id) for j in jobs if j.state in (JobState.DEAD, JobState.CANCELLED)]
        for j in jobs:
            if j.state not in (JobState.DEAD, JobState.CANCELLED) and len(reasons) < BULK_REASONS:
                reasons.append(f"job {j.id!r} is {j.state.value}; only dead or cancelled jobs can be retried")
        try:
            if chosen:
                store.retry([job_id for _, job_id in chosen], store.now())
            changed += len(chosen)
        except (Conflict, NotFound):  # nothing changed: find which, and let the others go back
            changed += one_by_one(chosen, last=False)
    changed += one_by_one(sorted(later), last=True)
    return Bulk(matched, changed, 0, matched - changed, tuple(reasons))
