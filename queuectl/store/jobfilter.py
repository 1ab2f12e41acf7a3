"""The records of finding jobs (queuectl.store.search): JobFilter, a job's dependencies both ways, and its attempts
that ended without completing.

Records are NamedTuples, as in queuectl.domain.models (defined without `from __future__ import annotations`).
"""

from typing import NamedTuple

from queuectl.domain.models import JobState, iso


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


class Attempt(NamedTuple):
    """An attempt of a job that ended without completing (docs/semantics.md, "Attempts"); times are Unix seconds.

    `n`: its place among the job's kept attempts, from 1 (a first `n` above 1 in a bounded list says how many
    earlier ones were left off). `attempt`: the job's attempt number of the run (1 for the first; numbering starts
    again after a retry by hand). `outcome`: what the job became: failed (a retry follows), dead or cancelled.
    `end_code`: recovered when recovery ended it (its worker was lost), else None. `exit_code`: the command's exit
    status, None if it had none (killed, timed out, could not start, its worker lost). `error`: the job's last
    error as the run left it.
    """

    n: int
    attempt: int
    outcome: JobState
    end_code: str | None
    exit_code: int | None
    error: str | None
    started_at: float | None
    finished_at: float | None

    @property
    def duration(self) -> float | None:
        """Seconds from its start to its end (None if either is unknown)."""
        if self.started_at is None or self.finished_at is None:
            return None
        return max(self.finished_at - self.started_at, 0.0)

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (`show --json`'s `errors`, docs/cli.md); times as ISO-8601 UTC."""
        return {"n": self.n, "attempt": self.attempt, "outcome": self.outcome.value, "end_code": self.end_code,
                "exit_code": self.exit_code, "error": self.error, "started_at": iso(self.started_at),
                "finished_at": iso(self.finished_at), "duration": self.duration}
