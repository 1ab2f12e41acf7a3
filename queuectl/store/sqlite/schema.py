"""The SQLite schema and its forward migrations, keyed by PRAGMA user_version."""

from queuectl.store import activity
from queuectl.store.shared_schema import (ATTEMPT_ENDED, CANCEL_DEPENDANTS, CASCADED, JOB_ATTEMPTS, KEEP_ATTEMPT,
                                         KEY_HELD, KEY_HELD_V6, RECOVERED, RELEASE_DEPENDANTS, SCHEDULES_LIMITS,
                                         SEARCH_INDEXES, START_CLOCKS, STOPPED_WORKERS)

#: Written to PRAGMA application_id so a queuectl database is told apart from other SQLite files ("QCTL").
APPLICATION_ID = 0x5143544C

#: The jobs table's columns in version 3, which version 4 copies.
_V3_COLUMNS = ("seq, id, queue, command, state, priority, attempts, max_retries, timeout, cwd, run_at, created_at,"
               " updated_at, started_at, finished_at, worker_id, pgid, pgid_start, exit_code, last_error, delay,"
               " due_boot, due_mono")


#: The jobs table's columns in version 6, which version 7 copies.
_V6_COLUMNS = _V3_COLUMNS + ", cancel_requested_at, key"


#: What the table rebuilds (steps 4 and 7) share, as step 4 wrote it: the jobs table's first columns
#: (STATES: its state CHECK's list), and the indexes and triggers made again on the new table.
_REBUILT_COLUMNS = """    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    queue       TEXT NOT NULL,
    command     TEXT NOT NULL,
    state       TEXT NOT NULL
                CHECK (state IN (STATES)),
    priority    INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    max_retries INTEGER,
    timeout     REAL,
    cwd         TEXT,
    run_at      REAL NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    worker_id   INTEGER,
    pgid        INTEGER,
    pgid_start  INTEGER,
    exit_code   INTEGER,
    last_error  TEXT,
    delay       REAL,
    due_boot    TEXT,
    due_mono    REAL,
"""
_V4_STATES = "'pending', 'processing', 'completed', 'failed', 'dead', 'cancelled'"
_V7_STATES = _V4_STATES + ", 'blocked'"
#: The triggers that keep job_counts (by queue and state) as jobs are added, moved and deleted.
_COUNT_TRIGGERS = """CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN
    INSERT INTO job_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_count_update AFTER UPDATE OF state, queue ON jobs
WHEN OLD.state IS NOT NEW.state OR OLD.queue IS NOT NEW.queue BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    INSERT INTO job_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
        ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
END;
"""

_REBUILT_INDEXES_TRIGGERS = """CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, seq, state, queue, due_boot, due_mono, delay)
    WHERE state IN ('pending', 'failed');
CREATE INDEX jobs_processing ON jobs (worker_id) WHERE state = 'processing';
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE INDEX jobs_queue_state ON jobs (queue, state, seq);
-- Retention deletes finished jobs oldest first.
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE state IN ('completed', 'dead', 'cancelled');
COUNT_TRIGGERS
CREATE TRIGGER jobs_wall_only_reschedule AFTER UPDATE OF run_at ON jobs
WHEN NEW.run_at IS NOT OLD.run_at AND NEW.due_mono IS OLD.due_mono AND NEW.due_mono IS NOT NULL BEGIN
    UPDATE jobs SET delay = NULL, due_boot = NULL, due_mono = NULL WHERE seq = NEW.seq;
END;
""".replace("COUNT_TRIGGERS\n", _COUNT_TRIGGERS)


#: The run counter's trigger as steps 5 and 10 make it: a run (a job that leaves processing, its start recorded)
#: counted by outcome; RECOVERED_WHEN tells a recovered one (step 5: by its error text; step 10: its code).
_COUNT_RUNS = """CREATE TRIGGER jobs_count_runs AFTER UPDATE OF state ON jobs
WHEN OLD.state = 'processing' AND NEW.state IS NOT 'processing' AND NEW.started_at IS NOT NULL BEGIN
    INSERT INTO job_runs (queue, outcome, n) VALUES (NEW.queue,
        CASE WHEN RECOVERED_WHEN THEN 'recovered'
             WHEN NEW.state = 'pending' THEN 'requeued' ELSE NEW.state END, 1)
        ON CONFLICT (queue, outcome) DO UPDATE SET n = n + 1;
END;
"""

#: Step 11: activity history (queuectl.store.activity), per queue and minute, recorded by a trigger as jobs change.
_ACTIVITY = f"""
CREATE TABLE activity (
    {activity.table("REAL", "INTEGER")}
) WITHOUT ROWID;
CREATE INDEX activity_minute ON activity (minute);
""" + activity.sqlite_trigger()


#: MIGRATIONS[n] takes a database from user_version n-1 to n. Append; never edit a released step.
MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE jobs (
    seq         INTEGER PRIMARY KEY,          -- enqueue order
    id          TEXT NOT NULL UNIQUE,
    queue       TEXT NOT NULL,
    command     TEXT NOT NULL,
    state       TEXT NOT NULL
                CHECK (state IN ('pending', 'processing', 'completed', 'failed', 'dead')),
    priority    INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,   -- runs started so far
    max_retries INTEGER,                      -- NULL: the max-retries setting at failure time
    timeout     REAL,                         -- seconds; NULL: the job-timeout setting
    cwd         TEXT,
    run_at      REAL NOT NULL,                -- Unix seconds: not claimed before this
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    worker_id   INTEGER,                      -- workers.id of the owner while processing
    pgid        INTEGER,                      -- the job's process group while processing
    pgid_start  INTEGER,                      -- its leader's start time (clock ticks since boot)
    exit_code   INTEGER,
    last_error  TEXT
);
-- Claim order among claimable jobs; partial, so millions of finished rows cost nothing.
CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, seq) WHERE state IN ('pending', 'failed');
CREATE INDEX jobs_processing ON jobs (worker_id) WHERE state = 'processing';
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE INDEX jobs_queue_state ON jobs (queue, state, seq);

-- Output lives apart from jobs so that job rows stay small to scan.
CREATE TABLE job_output (
    seq    INTEGER PRIMARY KEY REFERENCES jobs (seq) ON DELETE CASCADE,
    stdout BLOB NOT NULL,
    stderr BLOB NOT NULL
);

-- Counts per queue and state, kept by triggers, so `status` does not scan jobs.
CREATE TABLE job_counts (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;
COUNT_TRIGGERS

CREATE TABLE workers (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- one incarnation; never reused
    name         TEXT NOT NULL UNIQUE,
    host         TEXT NOT NULL,
    boot_id      TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    pid_start    INTEGER,
    slots        INTEGER NOT NULL,
    queues       TEXT NOT NULL DEFAULT '',            -- comma-separated; '' = every queue
    unit         TEXT,
    started_at   REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);

CREATE TABLE config (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL                               -- JSON
) WITHOUT ROWID;
""".replace("COUNT_TRIGGERS\n", _COUNT_TRIGGERS),
    2: """
-- Set when a worker begins to drain, so `worker stop` can wait for it without signalling it again.
ALTER TABLE workers ADD COLUMN draining_since REAL;
""",
    3: """
-- Liveness that no wall-clock step can fool: heartbeats also on the monotonic clock of the
-- worker's boot (boot_id's first word), and a count that recovery compares before it acts.
ALTER TABLE workers ADD COLUMN heartbeat_mono REAL;            -- CLOCK_MONOTONIC seconds
ALTER TABLE workers ADD COLUMN beats INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN pid_ns TEXT;                     -- /proc/self/ns/pid of the worker
ALTER TABLE workers ADD COLUMN uid INTEGER;                     -- its effective uid
-- Due times that survive a step: a relative wait (a retry's backoff, an enqueue's delay, or 0)
-- is kept with the monotonic time it ends at on the boot that scheduled it; run_at stays the
-- wall-clock estimate, and alone decides for a run_at given as an absolute time (delay NULL)
-- and for jobs scheduled before version 3.
ALTER TABLE jobs ADD COLUMN delay REAL;                         -- seconds; NULL: run_at is absolute
ALTER TABLE jobs ADD COLUMN due_boot TEXT;                      -- the clock domain of due_mono
ALTER TABLE jobs ADD COLUMN due_mono REAL;                      -- CLOCK_MONOTONIC seconds
DROP INDEX jobs_ready;
-- Claim order, with what a claim filters on along, so that it reads the index alone.
CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, seq, state, queue, due_boot, due_mono, delay)
    WHERE state IN ('pending', 'failed');
-- A worker of version 2 (during an upgrade) reschedules run_at alone: the monotonic due time
-- it leaves would be stale, so such a job falls back to the wall clock.
CREATE TRIGGER jobs_wall_only_reschedule AFTER UPDATE OF run_at ON jobs
WHEN NEW.run_at IS NOT OLD.run_at AND NEW.due_mono IS OLD.due_mono AND NEW.due_mono IS NOT NULL BEGIN
    UPDATE jobs SET delay = NULL, due_boot = NULL, due_mono = NULL WHERE seq = NEW.seq;
END;
""",
    4: """
-- The cancelled state. SQLite cannot change a CHECK constraint in place: the table is rebuilt
-- (https://www.sqlite.org/lang_altertable.html, "other kinds of table schema changes"), with
-- foreign keys off (the migrator turns them off around this step).
CREATE TABLE jobs_v4 (
REBUILT_COLUMNS    cancel_requested_at REAL                  -- Unix seconds: `queuectl cancel` of a processing job
);
INSERT INTO jobs_v4 (COLS) SELECT COLS FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v4 RENAME TO jobs;
REBUILT_INDEXES_TRIGGERS
-- How runs ended, by queue: counters for `queuectl metrics` that retention does not touch.
CREATE TABLE job_runs (
    queue   TEXT NOT NULL,
    outcome TEXT NOT NULL,  -- completed, failed (a retry follows), dead, cancelled, recovered, requeued
    n       INTEGER NOT NULL,
    PRIMARY KEY (queue, outcome)
) WITHOUT ROWID;
CREATE TRIGGER jobs_count_runs AFTER UPDATE OF state ON jobs
WHEN OLD.state = 'processing' AND NEW.state IS NOT 'processing' BEGIN
    INSERT INTO job_runs (queue, outcome, n) VALUES (NEW.queue,
        CASE WHEN NEW.last_error = 'worker lost' THEN 'recovered'
             WHEN NEW.state = 'pending' THEN 'requeued' ELSE NEW.state END, 1)
        ON CONFLICT (queue, outcome) DO UPDATE SET n = n + 1;
END;

-- Queues an operator paused (`queuectl pause`): no claims from them until resumed.
CREATE TABLE queues (
    name      TEXT PRIMARY KEY,
    paused_at REAL                            -- Unix seconds; NULL: not paused
) WITHOUT ROWID;

-- Leases for work one worker at a time does (retention): holder is a workers.id.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     INTEGER NOT NULL,
    expires_at REAL NOT NULL                  -- Unix seconds
) WITHOUT ROWID;
""".replace("COLS", _V3_COLUMNS).replace("REBUILT_COLUMNS", _REBUILT_COLUMNS.replace("STATES", _V4_STATES))
       .replace("REBUILT_INDEXES_TRIGGERS", _REBUILT_INDEXES_TRIGGERS),
    # A job claimed ahead and given back unstarted (started_at NULL: released, or recovered from
    # a dead worker before its start was recorded) made no run: it is not counted as one.
    5: "\nDROP TRIGGER jobs_count_runs;\n" + _COUNT_RUNS.replace("RECOVERED_WHEN", "NEW.last_error = 'worker lost'"),
    # Idempotency keys: at most one job that has not ended (pending, failed and due again, or
    # processing) holds a key; an enqueue of a held key adds nothing (SqlStore.enqueue).
    6: f"""
ALTER TABLE jobs ADD COLUMN key TEXT;
CREATE UNIQUE INDEX jobs_key_held ON jobs (key) WHERE {KEY_HELD_V6};
""",
    # Dependencies (a job's `after`): the blocked state, which again needs the table rebuilt for its
    # CHECK (as step 4). A blocked job waits for `blockers` dependencies still to complete; job_deps
    # lists them; `dependants` marks a job some other job is after, so that the triggers below run
    # for those jobs alone. Blocked jobs are in no claim index: claims never read them.
    7: """
CREATE TABLE jobs_v7 (
REBUILT_COLUMNS    cancel_requested_at REAL,
    key         TEXT,
    blockers    INTEGER NOT NULL DEFAULT 0,   -- dependencies not yet completed (while blocked)
    dependants  INTEGER NOT NULL DEFAULT 0    -- 1: a job is after this one
);
INSERT INTO jobs_v7 (COLS) SELECT COLS FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v7 RENAME TO jobs;
REBUILT_INDEXES_TRIGGERSCREATE UNIQUE INDEX jobs_key_held ON jobs (key) WHERE KEY_HELD;
CREATE TRIGGER jobs_count_runs AFTER UPDATE OF state ON jobs
WHEN OLD.state = 'processing' AND NEW.state IS NOT 'processing' AND NEW.started_at IS NOT NULL BEGIN
    INSERT INTO job_runs (queue, outcome, n) VALUES (NEW.queue,
        CASE WHEN NEW.last_error = 'worker lost' THEN 'recovered'
             WHEN NEW.state = 'pending' THEN 'requeued' ELSE NEW.state END, 1)
        ON CONFLICT (queue, outcome) DO UPDATE SET n = n + 1;
END;

-- job seq waits for job after_seq to complete.
CREATE TABLE job_deps (
    seq       INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    after_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    PRIMARY KEY (seq, after_seq)
) WITHOUT ROWID;
CREATE INDEX job_deps_after ON job_deps (after_seq, seq);
-- Output written while the job runs (for `logs --follow`): which attempt's it is, and how many bytes
-- that attempt has written in all, of which stdout and stderr hold the last output-limit.
ALTER TABLE job_output ADD COLUMN attempt INTEGER;
ALTER TABLE job_output ADD COLUMN stdout_total INTEGER;
ALTER TABLE job_output ADD COLUMN stderr_total INTEGER;
-- In the transaction that completes a job, its dependants whose last dependency it was become pending.
CREATE TRIGGER jobs_release_dependants AFTER UPDATE OF state ON jobs
WHEN NEW.dependants <> 0 AND NEW.state = 'completed' AND OLD.state IS NOT 'completed' BEGIN
    RELEASE_DEPENDANTS;
END;
-- A job that ends dead or cancelled cancels its dependants, and theirs, at once.
CREATE TRIGGER jobs_cancel_dependants AFTER UPDATE OF state ON jobs
WHEN NEW.dependants <> 0 AND NEW.state IN ('dead', 'cancelled') AND OLD.state IS NOT NEW.state
    AND NOT (CASCADED) BEGIN
    CANCEL_DEPENDANTS;
END;
""".replace("COLS", _V6_COLUMNS).replace("REBUILT_COLUMNS", _REBUILT_COLUMNS.replace("STATES", _V7_STATES))
       .replace("REBUILT_INDEXES_TRIGGERS", _REBUILT_INDEXES_TRIGGERS).replace("KEY_HELD", KEY_HELD)
       .replace("RELEASE_DEPENDANTS", RELEASE_DEPENDANTS).replace("CANCEL_DEPENDANTS", CANCEL_DEPENDANTS)
       .replace("CASCADED", CASCADED),
    # Schedules and limits: SCHEDULES_LIMITS (both engines).
    8: SCHEDULES_LIMITS.replace("SCHEDULE_PK", "TEXT PRIMARY KEY").replace("REAL_T", "REAL")
                       .replace("INT_T", "INTEGER"),
    # Rate windows on the monotonic clock: START_CLOCKS (both engines).
    9: START_CLOCKS.replace("REAL_T", "REAL"),
    # Outcome codes: a run that recovery ended is told by jobs.end_code (RECOVERED), not by its error text.
    10: """
ALTER TABLE jobs ADD COLUMN end_code TEXT;    -- recovered: its last run's worker was lost; NULL: any other end
DROP TRIGGER jobs_count_runs;
""" + _COUNT_RUNS.replace("RECOVERED_WHEN", f"NEW.end_code = '{RECOVERED}'"),
    # Activity history: _ACTIVITY.
    11: _ACTIVITY,
    # Workers that ended, kept for `status` (STOPPED_WORKERS, both engines).
    12: STOPPED_WORKERS.replace("SEQ_PK", "INTEGER PRIMARY KEY").replace("REAL_T", "REAL").replace("INT_T", "INTEGER"),
    # Finding jobs by idempotency key, ended or not (queuectl.store.search; SEARCH_INDEXES).
    13: SEARCH_INDEXES,
    # A job's attempts that ended without completing (JOB_ATTEMPTS), kept by a row trigger whose WHEN is false on
    # a completion: the success path adds no row.
    14: JOB_ATTEMPTS.replace("INT_T", "INTEGER").replace("REAL_T", "REAL").replace("WITHOUT_ROWID", " WITHOUT ROWID")
        + f"CREATE TRIGGER jobs_attempts AFTER UPDATE OF state ON jobs\nWHEN {ATTEMPT_ENDED} BEGIN\n"
          f"    {KEEP_ATTEMPT};\nEND;\n",
}

#: Steps that rebuild a table referenced by a foreign key: foreign keys must be off around them.
REBUILDS = {4, 7}

SCHEMA_VERSION = max(MIGRATIONS)
