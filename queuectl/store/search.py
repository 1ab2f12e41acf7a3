"""Finding jobs: by a filter (queuectl.store.jobfilter.JobFilter), newest first in keyset pages, with a capped
count; a job's dependencies both ways (docs/semantics.md, "Finding jobs"); and its attempts that ended without
completing (docs/semantics.md, "Attempts").

Each filter field alone and state with queue read an index, so that a page costs about its length however many
jobs are stored: state the jobs_state index (state, seq); queue with state jobs_queue_state (queue, state, seq);
a queue without a state the same index one state at a time (a UNION ALL branch per state, each in seq order,
merged), since it serves no seq order across states; key jobs_key (SQLite step 13, PostgreSQL step 12); after
job_deps_after; an id prefix a range on the ids' byte order (SQLite's unique index on id; on PostgreSQL
jobs_id_c, the ids in the "C" collation, which keeps each prefix's ids together whatever the database's
locale), or, when more than PREFIX_SORT_MOST ids begin with it, the other fields' index (or the jobs in seq
order) with the range checked on each job. A key, a dependency or a sparse prefix picks few jobs: the other
terms are checked on each (_narrow). A text filter scans the jobs newest first until a page is full (or, for
a count, until the cap), since no index holds substrings.

SqlStore's find_jobs, count_jobs, dependencies and job_attempts are find, count, dependencies and attempts here.
"""

from __future__ import annotations

from queuectl.domain.errors import NotFound
from queuectl.domain.models import Job, JobState
from queuectl.store.core import JOB_COLUMNS
from queuectl.store.jobfilter import Attempt, Dependencies, JobFilter, Linked
from queuectl.store.jobs import with_after

#: How many jobs each way `dependencies` lists at most.
LINKED_MOST = 100
#: How many of a job's ended attempts `attempts` lists at most (the newest).
ATTEMPTS_MOST = 100
#: An id prefix that more ids than this begin with is read in seq order rather than from the ids' index: sorting
#: that many matches by seq would cost more than passing over the non-matching jobs between them.
PREFIX_SORT_MOST = 1000


def _conditions(store, f: JobFilter, dense: bool = False) -> tuple[list[str], list]:
    """Return the WHERE terms of `f` (to be joined by AND) and their parameters, state and queue left out;
    `dense`: the id prefix's range is read without its index (store.NOT_INDEXED)."""
    where: list[str] = []
    params: list = []
    if f.key is not None:
        where.append("key = ?")
        params.append(f.key)
    if f.after is not None:
        where.append("seq IN (SELECT d.seq FROM job_deps d WHERE d.after_seq = (SELECT p.seq FROM jobs p"
                     " WHERE p.id = ?))")
        params.append(f.after)
    if f.text is not None:
        # Both sides lowered by the same SQL function, so that the engine folds the pattern as it folds the data.
        where.append(f"({store.FIND.format('lower(command)', 'lower(?)')} > 0"
                     f" OR {store.FIND.format('lower(last_error)', 'lower(?)')} > 0)")
        params += [f.text, f.text]
    if f.id_prefix is not None:
        # Ids are ASCII (queuectl.domain.jobspec.ID_RULE): those that begin with p lie in [p, p with its last character
        # one higher) in byte order.
        ordered = store.NOT_INDEXED.format(store.ID_ORDER) if dense else store.ID_ORDER
        where.append(f"{ordered} >= ? AND {ordered} < ?")
        params += _prefix_range(f.id_prefix)
    return where, params


def _prefix_range(prefix: str) -> list[str]:
    """Return [low, high): the ids that begin with `prefix` in byte order (ids are ASCII: queuectl.domain.jobspec.ID_RULE)."""
    return [prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)]


def _dense(store, prefix: str) -> bool:
    """True if more than PREFIX_SORT_MOST ids begin with `prefix` (read from the ids' index alone)."""
    order = store.ID_ORDER
    with store._errors():
        return store.c.execute(f"SELECT count(*) FROM (SELECT 1 FROM jobs WHERE {order} >= ? AND {order} < ? LIMIT ?)"
                               " AS matched", (*_prefix_range(prefix), PREFIX_SORT_MOST + 1)
                               ).fetchone()[0] > PREFIX_SORT_MOST


def _narrow(store, f: JobFilter) -> tuple[bool, bool]:
    """Return (narrow, dense): `narrow` when a key, a dependency or an id prefix that few ids begin with picks the
    jobs (their index is read, and state, queue and seq are checked on each: store.NOT_INDEXED, as SQLite's
    planner, which has no statistics, would take the state or queue index, or the seq order, for the narrower);
    `dense` when an id prefix begins more than PREFIX_SORT_MOST ids."""
    dense = f.id_prefix is not None and _dense(store, f.id_prefix)
    return f.key is not None or f.after is not None or (f.id_prefix is not None and not dense), dense


def _select(store, f: JobFilter, state: JobState | None, before_seq: int | None, columns: str,
            narrow: bool, dense: bool) -> tuple[str, list]:
    """Return `SELECT columns FROM jobs WHERE ...` for `f` with `state` (in place of f.state) and seq below
    `before_seq`, and its parameters (`narrow`, `dense`: see _narrow)."""
    where, params = _conditions(store, f, dense)
    for column, value in (("queue", f.queue), ("state", JobState(state).value if state else None)):
        if value is not None:
            where.insert(0, f"{store.NOT_INDEXED.format(column) if narrow else column} = ?")
            params.insert(0, value)
    if before_seq is not None:
        where.append(f"{store.NOT_INDEXED.format('seq') if narrow else 'seq'} < ?")
        params.append(before_seq)
    sql = f"SELECT {columns} FROM jobs"
    return (sql + " WHERE " + " AND ".join(where) if where else sql), params


def find(store, filter: JobFilter, before_seq: int | None = None, limit: int = 50) -> list[Job]:
    """Return up to `limit` jobs that `filter` matches, newest first (seq descending), only those with seq below
    `before_seq` when given (the next page: the last job's seq), each with its `after` read in."""
    narrow, dense = _narrow(store, filter)
    if filter.queue is not None and filter.state is None and not narrow:
        branches, params = [], []
        for number, state in enumerate(JobState):
            sql, branch_params = _select(store, filter, state, before_seq, JOB_COLUMNS, narrow, dense)
            branches.append(f"SELECT * FROM ({sql} ORDER BY seq DESC LIMIT ?) AS s{number}")
            params += [*branch_params, limit]
        sql = " UNION ALL ".join(branches)
    else:
        sql, params = _select(store, filter, filter.state, before_seq, JOB_COLUMNS, narrow, dense)
    with store._errors():
        rows = store.c.execute(f"{sql} ORDER BY seq DESC LIMIT ?", (*params, limit)).fetchall()
    return with_after(store, [Job.from_row(r) for r in rows])


def count(store, filter: JobFilter, cap: int = 10_000) -> int:
    """Return how many jobs `filter` matches, reading at most `cap` + 1 of them: a result above `cap` means more."""
    narrow, _ = _narrow(store, filter)
    sql, params = _select(store, filter, filter.state, None, "1", narrow, False)
    with store._errors():
        return store.c.execute(f"SELECT count(*) FROM ({sql} LIMIT ?) AS matched", (*params, cap + 1)).fetchone()[0]


def dependencies(store, job_id: str) -> Dependencies:
    """Return the jobs `job_id` waits for and the jobs waiting for it, LINKED_MOST of each at most, oldest first,
    with their states. Raises NotFound."""
    ways = {}
    with store._errors():
        seq = _seq(store, job_id)
        for mine, theirs in (("seq", "after_seq"), ("after_seq", "seq")):
            ways[mine] = [Linked(r[0], JobState(r[1])) for r in store.c.execute(
                f"SELECT j.id, j.state FROM job_deps d JOIN jobs j ON j.seq = d.{theirs} WHERE d.{mine} = ?"
                f" ORDER BY d.{theirs} LIMIT ?", (seq, LINKED_MOST + 1))]
    waits_for, waited_by = ways["seq"], ways["after_seq"]
    return Dependencies(tuple(waits_for[:LINKED_MOST]), len(waits_for) > LINKED_MOST,
                        tuple(waited_by[:LINKED_MOST]), len(waited_by) > LINKED_MOST)


def attempts(store, job_id: str, limit: int | None = None) -> list[Attempt]:
    """Return the newest `limit` (None: ATTEMPTS_MOST) attempts of job `job_id` that ended without completing,
    oldest first (a seek of the job's rows in job_attempts). Raises NotFound."""
    with store._errors():
        rows = store.c.execute(f"SELECT {', '.join(Attempt._fields)} FROM job_attempts WHERE seq = ?"
                               " ORDER BY n DESC LIMIT ?",
                               (_seq(store, job_id), ATTEMPTS_MOST if limit is None else limit)).fetchall()
    return [Attempt(r["n"], r["attempt"], JobState(r["outcome"]), *(r[c] for c in Attempt._fields[3:]))
            for r in reversed(rows)]


def _seq(store, job_id: str) -> int:
    """Return job `job_id`'s seq; raise NotFound."""
    row = store.c.execute("SELECT seq FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise NotFound(f"no job with id {job_id!r}")
    return row[0]
