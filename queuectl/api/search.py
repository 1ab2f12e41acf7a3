"""Finding jobs: a filter checked field by field, and a page of the jobs it matches, newest first, with how many
match (docs/semantics.md, "Finding jobs"). The store's side: queuectl.store.search."""

from __future__ import annotations

from typing import NamedTuple

from queuectl.domain.errors import InvalidInput
from queuectl.domain.jobspec import check_id, check_queue, check_whole, is_unicode
from queuectl.domain.models import Job, job_state
from queuectl.store.jobfilter import JobFilter
from queuectl.api.jobs import matching_total

#: The most jobs a page holds, and how many it holds by default.
PAGE_MOST = 500
PAGE = 50
#: The most characters a text to search for holds.
TEXT_MOST = 200
#: A total above this is not counted further (JobPage.capped).
COUNT_CAP = 10_000


class JobPage(NamedTuple):
    """One page of the jobs a filter matches, newest first.

    `next_before`: the last job's seq when the page is full (pass it as `before` for the next page), else None.
    `total`: how many jobs match in all, at most COUNT_CAP when `capped` (more match than were counted).
    """

    jobs: list[Job]
    next_before: int | None
    total: int
    capped: bool


def job_filter(state: str | None = None, queue: str | None = None, key: str | None = None,
               after: str | None = None, text: str | None = None, id_prefix: str | None = None) -> JobFilter:
    """Check each field of a filter and return it as a JobFilter (queuectl.store.jobfilter); an empty value ("")
    is no filter, as an empty field of a form. Raises InvalidInput naming the field: a state that is none, a
    queue name, key, dependency id or id prefix that no job could have (queuectl.domain.jobspec's rules; a prefix at
    most as long as an id), a text longer than TEXT_MOST characters, or holding a NUL or a lone surrogate."""
    def given(value) -> bool:
        return value is not None and value != ""

    for name, value in (("text", text), ("key", key), ("after", after), ("id prefix", id_prefix)):
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    if given(text):
        if len(text) > TEXT_MOST:
            raise InvalidInput(f"the text to search for is longer than {TEXT_MOST} characters")
        if "\0" in text or not is_unicode(text):
            raise InvalidInput("the text to search for holds a NUL character or a lone surrogate")
    return JobFilter(state=job_state(state) if given(state) else None,
                     queue=check_queue(queue) if given(queue) else None,
                     key=check_id(key, "key") if given(key) else None,
                     after=check_id(after, "after (a job id)") if given(after) else None,
                     text=text if given(text) else None,
                     id_prefix=check_id(id_prefix, "an id prefix") if given(id_prefix) else None)


def search(store, state: str | None = None, queue: str | None = None, key: str | None = None,
           after: str | None = None, text: str | None = None, id_prefix: str | None = None,
           before: int | None = None, limit: int = PAGE) -> JobPage:
    """Return a page of up to `limit` jobs (1 to PAGE_MOST) that the filter (job_filter's fields) matches, newest
    first, those enqueued before job seq `before` when given (the previous page's next_before).

    The total comes from the kept counts (no scan) when only state and/or queue are given, else from a count
    of at most COUNT_CAP + 1 jobs. A text filter reads the jobs newest first until the page is full, and
    its count until COUNT_CAP + 1 match: with few matches among many jobs, each reads every job (one scan).
    Raises InvalidInput for a bad field (job_filter), limit or `before`.
    """
    f = job_filter(state, queue, key, after, text, id_prefix)
    check_whole(limit, "limit", low=1, high=PAGE_MOST)
    if before is not None:
        check_whole(before, "before (a job's seq)", low=1)
    jobs = store.find_jobs(f, before, limit)
    next_before = jobs[-1].seq if len(jobs) == limit else None
    if f.key is None and f.after is None and f.text is None and f.id_prefix is None:
        total, capped = matching_total(store, f.state and f.state.value, f.queue), False
    else:
        counted = store.count_jobs(f, COUNT_CAP)
        total, capped = min(counted, COUNT_CAP), counted > COUNT_CAP
    return JobPage(jobs, next_before, total, capped)
