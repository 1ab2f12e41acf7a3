"""The SQL fragments of the queue's rules that more than one statement needs, each written once.

The ready filter, the claim order, the claim's SET list, claiming ahead of free slots within a limit,
and a job's end as the exchange records it. Each is portable between SQLite and PostgreSQL and takes
its values through `{slot}`s, as queuectl.store.timing's rules do, rendered in one of two ways:
`timing.bind` / `timing.placeholders` (`?` placeholders: the statements of the concern modules and of
PostgreSQL's one-statement exchange) or `timing.render` (SQL expressions: the one-statement exchange's
values from its JSON records). A fragment's `col` argument is the jobs table's alias and a dot ("j.")
where a statement joins another table that has columns of the same names, else "".
"""

from __future__ import annotations

from queuectl.store import timing

#: Pending and failed jobs: the WHERE of the jobs_ready and jobs_ready_queue partial indexes (on SQLite
#: a claim names those indexes, and its planner needs their terms in the query:
#: https://www.sqlite.org/partialindex.html).
READY_STATES = "state IN ('pending', 'failed')"
#: Completed, dead and cancelled jobs: the WHERE of the jobs_finished partial index.
FINISHED_STATES = "state IN ('completed', 'dead', 'cancelled')"
#: Claim order: priority (higher first), then run_at, then enqueue order; claim_key is the same order in Python.
CLAIM_ORDER = "priority DESC, run_at, seq"


def claim_key(priority: int, run_at: float, seq: int) -> tuple:
    """The sort key of CLAIM_ORDER, for rows or jobs read back in another order (UPDATE ... RETURNING)."""
    return -priority, run_at, seq


def not_paused(col: str = "") -> str:
    """The condition that a job's queue is not paused (`queuectl pause`): claims take nothing from a paused queue."""
    return f"{col}queue NOT IN (SELECT name FROM queues WHERE paused_at IS NOT NULL)"


def ready(col: str = "") -> str:
    """The condition that a job is ready to be claimed: pending or failed, due (timing.due), of a queue not
    paused. Slots: domain, mono, wall."""
    return f"{col}{READY_STATES} AND {timing.due(col)} AND {not_paused(col)}"


#: The SET list of a claim: the job is processing for worker {worker} from {wall} (the store's clock), and
#: counts no attempt until its start is recorded (see SqlStore.exchange). Slots: worker, wall.
CLAIM_SET = ("state = 'processing', worker_id = {worker}, started_at = NULL, updated_at = {wall},"
             " finished_at = NULL, exit_code = NULL, pgid = NULL")


def allowed(room: str, free: str, claim: str) -> str:
    """How many jobs a claim of at most `claim` jobs, for `free` free slots, takes of a limited queue with `room`
    places left (SQL integer expressions; `room` may be below 0, a limit lowered under its processing jobs):
    none without room, else timing.ahead (the free slots' share, and ahead of them at most half of the room
    beyond), at most `claim`."""
    share = timing.ahead(room, free)
    return f"(CASE WHEN {room} <= 0 THEN 0 WHEN {share} > {claim} THEN {claim} ELSE {share} END)"


def counted(col: str = "") -> str:
    """The attempts of a job once a record of its start is applied: {inc} (1 if the record holds a start, else 0)
    more, unless its start is recorded already, so that an exchange sent again (its reply lost, its commit
    unknown) counts nothing twice. Slot: inc."""
    return f"{col}attempts + CASE WHEN {col}started_at IS NULL THEN {{inc}} ELSE 0 END"


def running_set(col: str = "") -> str:
    """The SET list that records a running job's start and its process group (each kept if not given), at {wall}
    (the store's clock: the minute its start counts in, queuectl.store.activity). Slots: inc, started_at, pgid,
    pgid_start, wall."""
    return (f"attempts = {counted(col)}, started_at = coalesce({{started_at}}, {col}started_at),"
            f" pgid = coalesce({{pgid}}, {col}pgid), pgid_start = coalesce({{pgid_start}}, {col}pgid_start),"
            " updated_at = {wall}")


#: The columns a job's end sets: when, how it exited, the error, no outcome code (that is recovery's:
#: shared_schema.RECOVERED) and no owner (slots: wall, ended_at, exit_code, error).
ENDED_SET = ("updated_at = {wall}, finished_at = {ended_at}, exit_code = {exit_code}, last_error = {error},"
             " end_code = NULL, worker_id = NULL, pgid = NULL, pgid_start = NULL")


def completed_set(col: str = "") -> str:
    """The SET list of a job that ended with exit status 0 (its start counted if recorded with its end).
    Slots: inc, started_at, wall, ended_at, exit_code, error."""
    return (f"state = 'completed', attempts = {counted(col)}, started_at = coalesce({{started_at}}, {col}started_at),"
            f" {ENDED_SET}")


#: A run's output stored for its job (an INSERT's column list: the caller adds the VALUES or SELECT), replacing
#: an earlier attempt's.
KEEP_OUTPUT = "INSERT INTO job_output (seq, stdout, stderr, attempt, stdout_total, stderr_total)"
#: The ON CONFLICT clause of KEEP_OUTPUT (a job's output is one row).
KEEP_OUTPUT_CONFLICT = (" ON CONFLICT (seq) DO UPDATE SET stdout = excluded.stdout, stderr = excluded.stderr,"
                        " attempt = excluded.attempt, stdout_total = excluded.stdout_total,"
                        " stderr_total = excluded.stderr_total")
