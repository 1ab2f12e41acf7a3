"""The records of finding jobs (queuectl.store.search): JobFilter, and a job's dependencies both ways.

Records are NamedTuples, as in queuectl.models (defined without `from __future__ import annotations`).
"""

from typing import NamedTuple

from queuectl.models import JobState


class JobFilter(NamedTuple):
    """Which jobs to find (docs/semantics.md, "Finding jobs"); a field left None does not filter, and the
    fields given must all hold.

    `state`: jobs in that state. `queue`: of that queue. `key`: holding that idempotency key (exactly,
    whether or not the job has ended). `after`: a job id: the jobs that depend on it (whose `after` names
    it). `text`: a substring of the command or of the last error, case-insensitive (SQLite folds ASCII
    letters; PostgreSQL as its database's locale does), no wildcards. `id_prefix`: ids beginning with it.
    Valid values are the caller's to check (queuectl.api.search.job_filter).
    """

    state: JobState | None = None
    queue: str | None = None
    key: str | None = None
    after: str | None = None
    text: str | None = None
    id_prefix: str | None = None

    def empty(self) -> bool:
        """True if no field is given: the filter matches every job."""
        return all(value is None for value in self)


class Linked(NamedTuple):
    """A job at the other end of a dependency: its id and state."""

    id: str
    state: JobState


class Dependencies(NamedTuple):
    """A job's dependencies both ways, each list oldest first and bounded (store.search.LINKED_MOST).

    `waits_for`: the jobs it is after (it runs once they have completed); `waited_by`: the jobs after it.
    `more_waits_for` / `more_waited_by`: True when the list was cut at the bound.
    """

    waits_for: tuple[Linked, ...]
    more_waits_for: bool
    waited_by: tuple[Linked, ...]
    more_waited_by: bool
