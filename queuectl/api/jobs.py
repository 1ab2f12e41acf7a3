"""Jobs in and out: enqueue (one job, or a file of them), wait for jobs to end, follow one's output.

Waiting and following ride out an outage of the database through a queuectl.api.outage.Patience
that the caller makes before it changes anything (a bad QUEUECTL_OUTAGE_LIMIT is refused first).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Sequence

from queuectl.domain.errors import Conflict, InvalidInput, NotFound
from queuectl.domain.models import job_state

if TYPE_CHECKING:
    from queuectl.api.waiting import Waited


def parse_jobs(lines: Iterable[bytes], now: float | None = None) -> tuple[list, list[int]]:
    """Parse one JSON job per line (blank lines skipped); return (the jobs, the line number of each).

    `now`: Unix seconds that validation takes relative times from (the store sets each job's
    run_at from its own clock). Raises InvalidInput naming the line, for a line that is not
    UTF-8 or not a valid job, and for no job at all: all or none are enqueued.
    """
    from queuectl.domain.jobspec import parse_job

    now = time.time() if now is None else now
    jobs, numbers = [], []
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"line {number}: not UTF-8 text; nothing was enqueued") from None
        if not text.strip():
            continue
        try:
            jobs.append(parse_job(text.rstrip("\r\n"), now))  # its position is then within this line
        except InvalidInput as e:
            raise InvalidInput(f"line {number}: {e}; nothing was enqueued") from None
        numbers.append(number)
    if not jobs:
        raise InvalidInput("no jobs in the file")
    return jobs, numbers


def parse_one(text: str, now: float | None = None):
    """Parse one JSON job (a queuectl.domain.jobspec.NewJob); raises InvalidInput."""
    from queuectl.domain.jobspec import parse_job

    return parse_job(text, time.time() if now is None else now)


def parse_argv(argv: Sequence[str], fields: dict, now: float | None = None):
    """Parse a job given as an argv, run as it is without a shell's reading, and its other fields (the JSON
    form's names; None: absent) into a queuectl.domain.jobspec.NewJob; raises InvalidInput."""
    from queuectl.domain.jobspec import parse_argv as parse

    return parse(argv, fields, time.time() if now is None else now)


def enqueue(store, jobs: Sequence, lines: Sequence[int] | None = None) -> list:
    """Add `jobs` (queuectl.domain.jobspec.NewJob) in one transaction, all or none; return a store Enqueued for each.

    Each Enqueued says whether the job was added, added cancelled at once (a dependency had
    ended dead or cancelled), or matched by its key (`held`: nothing added, the holder's id).
    `lines`: the jobs' line numbers in a file, named in errors. Raises Conflict (a duplicate id)
    and NotFound (an unknown `after`), and with `lines` says the line and that nothing was enqueued.
    """
    from queuectl.store import DuplicateJob, UnknownDependency

    try:
        return store.enqueue(list(jobs), store.now())
    except DuplicateJob as e:
        if lines is None:
            raise
        raise Conflict(f"line {lines[e.index]}: {e}; nothing was enqueued") from None
    except UnknownDependency as e:
        if lines is None:
            raise
        raise NotFound(f"line {lines[e.index]}: {e}") from None


def wait(store, job_ids: Sequence[str], patience, timeout: float | None = None,
         note: Callable[[str], None] | None = None) -> Waited:
    """Wait until every job of `job_ids` has ended (completed, dead or cancelled), or `timeout` seconds passed.

    Ids that name no job are returned as `unknown` and nothing is waited for. Reads go through
    `patience` (queuectl.api.outage.Patience; DatabaseUnavailable when it gives up, which a
    `timeout` may bring forward). Jobs are read every queuectl.api.waiting.POLL seconds.
    `note`, if given, gets a line for each attempt that ends failed meanwhile
    ("job j1: attempt 2 of 4 failed (exit code 3): retry in 4 s": queuectl.api.waiting.Attempts).
    """
    from queuectl.api.waiting import Waited, wait_for_end

    job_ids = list(dict.fromkeys(job_ids))
    known = patience.read(lambda: store.jobs_by_id(job_ids), None if timeout is None else time.monotonic() + timeout)
    unknown = [job_id for job_id in job_ids if job_id not in known]
    if unknown:
        return Waited(unknown=unknown)
    jobs, late = wait_for_end(store, job_ids, patience, timeout, note=note)
    return Waited({j: jobs[j] for j in job_ids}, [], late)


def wait_enqueued(store, job_ids: Sequence[str], patience, note: Callable[[str], None] | None = None) -> Waited:
    """Wait for the jobs of `job_ids`, just enqueued, to end (no timeout); return what the wait saw.

    A job deleted meanwhile (purged) is not waited for. Its `status` is the exit status `enqueue
    --wait` gives (Waited.status). Raises, and says attempts to `note`, as `wait` does.
    """
    from queuectl.api.waiting import Waited, wait_for_end

    job_ids = list(dict.fromkeys(job_ids))
    jobs, _ = wait_for_end(store, job_ids, patience, note=note)
    return Waited({j: jobs[j] for j in job_ids if j in jobs})


def wait_status(store, job_ids: Sequence[str], patience, note: Callable[[str], None] | None = None) -> int:
    """Wait for the jobs of `job_ids` to end (no timeout); return the exit status `enqueue --wait` gives.

    That is queuectl.api.waiting.exit_status of the first job, in the order given, that did not
    complete, else 0 (Waited.status). Raises, and says attempts to `note`, as `wait` does.
    """
    return wait_enqueued(store, job_ids, patience, note).status


def follow(store, job_id: str, out: BinaryIO, err: BinaryIO, note: Callable[[str], None], patience):
    """Write job `job_id`'s output as it is written until the job has ended; return the job as it ended.

    See queuectl.api.following.follow (its stdout to `out`, stderr to `err`, a line to `note`
    for each retry followed and for bytes lost); raises NotFound for no such job and
    DatabaseUnavailable when `patience` gives up on an outage.
    """
    from queuectl.api.following import follow as follow_output

    return follow_output(store, job_id, out, err, note, patience=patience)


def list_jobs(store, state: str | None = None, queue: str | None = None, limit: int = 100) -> tuple[list, int]:
    """Return (up to `limit` jobs in `state` and `queue` (None: any), newest first; how many match in all).

    The total comes from the kept counts (no scan), and is read only when the limit cut the
    list short (else it is the list's length). Raises InvalidInput for a bad queue name or state.
    """
    from queuectl.domain.jobspec import check_queue

    if queue is not None:
        check_queue(queue)
    chosen = job_state(state) if state else None
    jobs = store.list_jobs(chosen, queue, limit)
    return jobs, matching_total(store, state, queue) if len(jobs) >= limit else len(jobs)


def show(store, job_id: str, output: bool = False):
    """Return job `job_id`'s record (a queuectl.domain.models.Job), with its captured output if `output`;
    raises NotFound."""
    return store.get_job(job_id, output=output)


def exists(store, job_id: str) -> bool:
    """Whether a job `job_id` is stored (a read by key)."""
    return job_id in store.jobs_by_id([job_id])


def dependencies(store, job_id: str):
    """Return job `job_id`'s dependencies both ways (queuectl.store.jobfilter.Dependencies: the jobs it waits for and
    those waiting for it, each oldest first, 100 at most, with their states). Raises NotFound."""
    return store.dependencies(job_id)


def attempts(store, job_id: str) -> list:
    """Return job `job_id`'s attempts that ended without completing (queuectl.store.jobfilter.Attempt), oldest first,
    the newest 100 at most (a first `n` above 1 says how many earlier ones are left off). Its current attempt while
    it runs, and its last one once it completed, are the job's own record (`show`; docs/semantics.md, "Attempts").
    Raises NotFound."""
    return store.job_attempts(job_id)


def matching_total(store, state: str | None, queue: str | None) -> int:
    """Return how many jobs are in `state` and `queue` (None: any), from the kept counts (no scan)."""
    return sum(n for q, per in store.counts().items() if queue in (None, q)
               for s, n in per.items() if state in (None, s))
