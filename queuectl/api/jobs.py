"""Jobs in and out: enqueue (one job, or a file of them), and the jobs read: listed, shown, their attempts and
dependencies. Waiting for jobs to end is queuectl.api.waiting's, following one's output queuectl.api.following's:
`queuectl enqueue` imports this module, and a plain enqueue waits for nothing.
"""

from __future__ import annotations

import time
from typing import Iterable, Sequence

from queuectl.domain import jobspec
from queuectl.domain.errors import Conflict, InvalidInput, NotFound
from queuectl.domain.models import job_state


def parse_jobs(lines: Iterable[bytes], now: float | None = None) -> tuple[list, list[int]]:
    """Parse one JSON job per line (blank lines skipped); return (the jobs, the line number of each).

    `now`: Unix seconds that validation takes relative times from (the store sets each job's
    run_at from its own clock). Raises InvalidInput naming the line, for a line that is not
    UTF-8 or not a valid job, and for no job at all: all or none are enqueued.
    """
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
            jobs.append(jobspec.parse_job(text.rstrip("\r\n"), now))  # its position is then within this line
        except InvalidInput as e:
            raise InvalidInput(f"line {number}: {e}; nothing was enqueued") from None
        numbers.append(number)
    if not jobs:
        raise InvalidInput("no jobs in the file")
    return jobs, numbers


def parse_one(text: str, now: float | None = None):
    """Parse one JSON job (a queuectl.domain.jobspec.NewJob); raises InvalidInput."""
    return jobspec.parse_job(text, time.time() if now is None else now)


def parse_argv(argv: Sequence[str], fields: dict, now: float | None = None):
    """Parse a job given as an argv, run as it is without a shell's reading, and its other fields (the JSON
    form's names; None: absent) into a queuectl.domain.jobspec.NewJob; raises InvalidInput."""
    return jobspec.parse_argv(argv, fields, time.time() if now is None else now)


def enqueue(store, jobs: Sequence, lines: Sequence[int] | None = None) -> list:
    """Add `jobs` (queuectl.domain.jobspec.NewJob) in one transaction, all or none; return a store Enqueued for each.

    Each Enqueued says whether the job was added, added cancelled at once (a dependency had
    ended dead or cancelled), or matched by its key (`held`: nothing added, the holder's id).
    `lines`: the jobs' line numbers in a file, named in errors. Raises Conflict (a duplicate id)
    and NotFound (an unknown `after`), and with `lines` says the line and that nothing was enqueued.
    """
    try:
        return store.enqueue(list(jobs), store.now())
    except (Conflict, NotFound) as e:
        # The store's DuplicateJob and UnknownDependency, by their `index`, the job's place in the batch (read
        # without importing the store, which a command's --help does not load).
        index = getattr(e, "index", None)
        if lines is None or index is None:
            raise
        if isinstance(e, Conflict):
            raise Conflict(f"line {lines[index]}: {e}; nothing was enqueued") from None
        raise NotFound(f"line {lines[index]}: {e}") from None


def list_jobs(store, state: str | None = None, queue: str | None = None, limit: int = 100) -> tuple[list, int]:
    """Return (up to `limit` jobs in `state` and `queue` (None: any), newest first; how many match in all).

    The total comes from the kept counts (no scan), and is read only when the limit cut the
    list short (else it is the list's length). Raises InvalidInput for a bad queue name or state.
    """
    if queue is not None:
        jobspec.check_queue(queue)
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
