"""What the SQLite and PostgreSQL schemas share, written once: the jobs that hold a key, what a job's dependants
become when it ends, and the schedules, limits and rate-clock steps as both engines make them (each engine's
types stand in as SCHEDULE_PK, REAL_T and INT_T). Each engine's own schema and migrations: queuectl.store.sqlite.schema,
queuectl.store.postgres.schema."""

#: The jobs that hold their idempotency key (the jobs_key_held partial index's WHERE, which an
#: enqueue's ON CONFLICT names): those that have not ended.
KEY_HELD = "key IS NOT NULL AND state IN ('pending', 'blocked', 'failed', 'processing')"

#: KEY_HELD as schema version 6 (PostgreSQL step 4) made it, before the blocked state.
KEY_HELD_V6 = "key IS NOT NULL AND state IN ('pending', 'failed', 'processing')"

#: What a job's dependants become when it completes or ends otherwise (triggers of both engines,
#: which name the job that changed NEW): released when it was the last of their dependencies not
#: completed; cancelled, every blocked job after it down the chains at once, each with a last error
#: naming it, when it ended dead or cancelled. The jobs so cancelled (CASCADED) run no trigger of
#: their own: there is nothing left below them (and PostgreSQL's triggers, which do recurse, would
#: otherwise nest as deep as the chain is long).
RELEASE_DEPENDANTS = ("UPDATE jobs SET blockers = blockers - 1, updated_at = NEW.updated_at,"
                      " state = CASE WHEN blockers <= 1 THEN 'pending' ELSE 'blocked' END"
                      " WHERE state = 'blocked' AND seq IN (SELECT seq FROM job_deps WHERE after_seq = NEW.seq)")

CANCEL_DEPENDANTS = (
    "UPDATE jobs SET state = 'cancelled', updated_at = NEW.updated_at, finished_at = NEW.updated_at,"
    " delay = NULL, due_boot = NULL, due_mono = NULL,"
    " last_error = 'dependency ' || NEW.id || CASE WHEN NEW.state = 'dead' THEN ' is dead' ELSE ' was cancelled' END"
    " WHERE state = 'blocked' AND seq IN (WITH RECURSIVE down (seq) AS (SELECT seq FROM job_deps"
    " WHERE after_seq = NEW.seq UNION SELECT d.seq FROM job_deps d JOIN down ON d.after_seq = down.seq)"
    " SELECT seq FROM down)")

#: A job NEW that CANCEL_DEPENDANTS cancelled.
CASCADED = "NEW.state = 'cancelled' AND coalesce(NEW.last_error, '') LIKE 'dependency %'"
#: The outcome code of a run that recovery ended because its worker was lost (jobs.end_code, which the run
#: counters read: `queuectl metrics` counts such runs as recovered); every other end of a run sets NULL. Before
#: the code (SQLite schema 10, PostgreSQL 9) the counters matched the error text 'worker lost', which a
#: cancelled job's recovery does not leave ('cancelled; worker lost': counted as cancelled, as it still is).
RECOVERED = "recovered"


def dependency_failed(dep_id: str, state: str) -> str:
    """The last error of a job whose dependency `dep_id` had already ended `state` (dead or cancelled)
    when the job was enqueued: CANCEL_DEPENDANTS's wording."""
    return f"dependency {dep_id} {'is dead' if state == 'dead' else 'was cancelled'}"


#: Recurring jobs (`queuectl schedule`) and queue limits (`queuectl limit`), as both engines make them
#: (SCHEDULE_PK, REAL_T and INT_T stand for each engine's types). A schedule's run is a job whose id
#: names the schedule and the slot (queuectl.domain.recurrence.slot_id): the jobs' unique id is what makes
#: every other attempt to fire that slot a no-op. Limits live beside pause in queues; queue_starts
#: holds the claims of rate-limited queues within their window.
SCHEDULES_LIMITS = """
CREATE TABLE schedules (
    name       SCHEDULE_PK,
    kind       TEXT NOT NULL CHECK (kind IN ('cron', 'every')),
    expr       TEXT NOT NULL,                -- a cron expression, or the interval in seconds
    zone       TEXT NOT NULL,                -- IANA time zone of a cron expression's fields
    template   TEXT NOT NULL,                -- JSON: the runs' job fields
    overlap    TEXT NOT NULL CHECK (overlap IN ('skip', 'allow')),
    created_at REAL_T NOT NULL,
    paused_at  REAL_T,                       -- Unix seconds; NULL: firing
    next_at    REAL_T NOT NULL,              -- the next slot, Unix seconds on the store's clock
    last_slot  REAL_T,                       -- the last slot fired or skipped
    last_job   TEXT,                         -- the id of the last run added
    fired_at   REAL_T,                       -- when it was added
    skipped    INT_T NOT NULL DEFAULT 0      -- slots skipped while the previous run had not ended
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE paused_at IS NULL;
ALTER TABLE queues ADD COLUMN concurrency INT_T;        -- at most this many jobs processing at once
ALTER TABLE queues ADD COLUMN rate_count INT_T;         -- at most rate_count claims ...
ALTER TABLE queues ADD COLUMN rate_window REAL_T;       -- ... in any rate_window seconds
-- Claims with limits in force read each queue's ready jobs apart (queuectl.store.limits).
CREATE INDEX jobs_ready_queue ON jobs (queue, priority DESC, run_at, seq) WHERE state IN ('pending', 'failed');
CREATE TABLE queue_starts (queue TEXT NOT NULL, at REAL_T NOT NULL);
CREATE INDEX queue_starts_queue ON queue_starts (queue, at);
"""

#: Workers that ended, kept after their registration goes so that `status` shows them (the newest
#: KEEP_STOPPED rows: queuectl.store.workers), as both engines add them (SEQ_PK, REAL_T, INT_T: each
#: engine's types). `ended`: drained (stopped on request, its jobs finished), forced (a second stop
#: signal requeued its running jobs), burst (no more work), lost (found dead or stale; its jobs
#: recovered). Nothing else reads it: recovery and liveness go by the workers table alone.
STOPPED_WORKERS = """
CREATE TABLE stopped_workers (
    seq        SEQ_PK,
    worker_id  INT_T NOT NULL,                 -- the registration's id
    name       TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INT_T NOT NULL,
    unit       TEXT,
    started_at REAL_T NOT NULL,
    stopped_at REAL_T NOT NULL,                -- on the store's clock
    ended      TEXT NOT NULL CHECK (ended IN ('drained', 'forced', 'burst', 'lost'))
);
CREATE INDEX stopped_workers_at ON stopped_workers (stopped_at);
"""

#: The clock of a rate-limited claim (queuectl.store.timing), as both engines add it (REAL_T: each engine's
#: type): the boot id and CLOCK_MONOTONIC seconds of the claiming worker beside its wall-clock `at`. Rows
#: from before (NULL boot) are read on the wall clock, as before.
START_CLOCKS = """
ALTER TABLE queue_starts ADD COLUMN boot TEXT;          -- boot id of the claim's monotonic reading
ALTER TABLE queue_starts ADD COLUMN mono REAL_T;        -- CLOCK_MONOTONIC seconds of that boot
CREATE INDEX queue_starts_mono ON queue_starts (queue, boot, mono);
"""


#: The index that finds jobs by idempotency key whether they have ended or not (queuectl.store.search; the
#: jobs_key_held index holds only the jobs that hold their key): partial, so jobs without a key cost nothing.
SEARCH_INDEXES = "CREATE INDEX jobs_key ON jobs (key) WHERE key IS NOT NULL;\n"


#: A job's attempts that ended without completing (docs/semantics.md, "Attempts"), as both engines make the table
#: (INT_T, REAL_T: each engine's types; WITHOUT_ROWID: SQLite's clause, which keeps a job's rows together). Kept by
#: a trigger in the transaction of the change (ATTEMPT_ENDED, KEEP_ATTEMPT), so that every path records them by
#: the same rule; deleted with their job. `n` orders a job's rows (1, 2, ...: attempt numbers start again at 1
#: after a retry by hand).
JOB_ATTEMPTS = """
CREATE TABLE job_attempts (
    seq         INT_T NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    n           INT_T NOT NULL,                -- its place among the job's rows, from 1
    attempt     INT_T NOT NULL,                -- the job's attempt number (jobs.attempts) of the run
    outcome     TEXT NOT NULL,                 -- what the job became: failed (a retry follows), dead, cancelled
    end_code    TEXT,                          -- jobs.end_code: recovered (its worker was lost), or NULL
    exit_code   INT_T,
    error       TEXT,                          -- jobs.last_error as the run left it
    started_at  REAL_T,
    finished_at REAL_T,
    PRIMARY KEY (seq, n)
)WITHOUT_ROWID;
"""

#: When a job's change (OLD to NEW, a row trigger's) ends an attempt without completing it: a run that started
#: leaves processing failed (a retry follows), dead or cancelled, whether its worker recorded the end (the
#: exchange), recovery did (worker lost) or a forced stop did (a cancel requested). False for a completion, for
#: a job given back unstarted (started_at NULL) and for a requeue to pending (the attempt is given back).
#: Equalities, not an IN list: SQLite builds an IN list's lookup table again at each evaluation in a trigger.
ATTEMPT_ENDED = ("OLD.state = 'processing' AND (NEW.state = 'failed' OR NEW.state = 'dead' OR NEW.state = 'cancelled')"
                 " AND NEW.started_at IS NOT NULL")

#: The row of an attempt ATTEMPT_ENDED says ended: its number is the job's attempts (the old count for a forced
#: stop's cancel, which gives the attempt back), its times, code and error the job's as the change left them.
KEEP_ATTEMPT = ("INSERT INTO job_attempts (seq, n, attempt, outcome, end_code, exit_code, error, started_at, finished_at)"
                " SELECT NEW.seq, coalesce(max(n), 0) + 1,"
                " CASE WHEN OLD.attempts > NEW.attempts THEN OLD.attempts ELSE NEW.attempts END,"
                " NEW.state, NEW.end_code, NEW.exit_code, NEW.last_error, NEW.started_at, NEW.finished_at"
                " FROM job_attempts WHERE seq = NEW.seq")
