"""The PostgreSQL schema and its forward migrations, keyed by queuectl.schema_version.

Everything lives in the schema `queuectl` of the database the URI names, so the queue's
tables never meet an application's own. Times are Unix seconds (double precision), as on
SQLite, so that both stores share their queries (queuectl.store.sql); they are written
on the database server's clock (see PostgresStore.clock).

Counters: on SQLite, triggers keep one row per (queue, state). On PostgreSQL that row
would be updated by every claim and every finish of every worker, a lock that all of
them queue for. Here statement-level triggers append deltas to job_count_deltas and
job_run_deltas instead (inserts never wait for each other), readers add them to the
folded totals, and one worker at a time folds them (PostgresStore.maintain).
"""


from queuectl.store.shared_schema import (ATTEMPT_ENDED, CANCEL_DEPENDANTS, CASCADED, JOB_ATTEMPTS, KEEP_ATTEMPT,
                                         KEY_HELD, KEY_HELD_V6, RECOVERED, RELEASE_DEPENDANTS, SCHEDULES_LIMITS,
                                         SEARCH_INDEXES, START_CLOCKS, STOPPED_WORKERS)
from queuectl.store import activity

#: The schema the tables live in.
SCHEMA = "queuectl"
#: The NOTIFY channel that wakes workers.
CHANNEL = "queuectl"

#: The tables of the schema, which queries name bare and the store qualifies (postgres.qualify).
TABLES = ("schema_version", "jobs", "job_output", "job_counts", "job_count_deltas", "job_runs", "job_run_deltas",
          "workers", "config", "queues", "leases", "job_deps",
          "schedules", "queue_starts", "activity", "activity_deltas", "stopped_workers", "job_attempts")

#: The body of the jobs table's update trigger (counts by state, and runs by outcome of the rows that
#: leave processing, RUNS_FILTER narrowing those, RECOVERED_WHEN telling a recovered run), shared by the steps
#: that create and replace it. Steps 1 and 3 told a recovered run by its error text (_LOST_TEXT); step 9 by
#: its outcome code (shared_schema.RECOVERED).
_COUNT_UPDATE = """
BEGIN
    INSERT INTO job_count_deltas (queue, state, n)
        SELECT queue, state, sum(n) FROM (
            SELECT queue, state, 1 AS n FROM new_rows UNION ALL SELECT queue, state, -1 FROM old_rows) d
        GROUP BY queue, state HAVING sum(n) <> 0;
    INSERT INTO job_run_deltas (queue, outcome, n)
        SELECT n.queue, CASE WHEN RECOVERED_WHEN THEN 'recovered'
                             WHEN n.state = 'pending' THEN 'requeued' ELSE n.state END, count(*)
        FROM old_rows o JOIN new_rows n ON n.seq = o.seq
        WHERE o.state = 'processing' AND n.state <> 'processing'RUNS_FILTER
        GROUP BY 1, 2;
    RETURN NULL;
END $$;"""
_LOST_TEXT = "n.last_error = 'worker lost'"

#: MIGRATIONS[n] takes the schema from version n-1 to n. Append; never edit a released step.
#: Each runs in one transaction whose search_path is the schema alone (SET LOCAL), so its bare
#: names land there whatever the connection's own search_path is.
MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE jobs (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- enqueue order
    id          text NOT NULL UNIQUE,
    queue       text NOT NULL,
    command     text NOT NULL,
    state       text NOT NULL
                CHECK (state IN ('pending', 'processing', 'completed', 'failed', 'dead', 'cancelled')),
    priority    integer NOT NULL DEFAULT 0,
    attempts    integer NOT NULL DEFAULT 0,
    max_retries integer,
    timeout     double precision,
    cwd         text,
    run_at      double precision NOT NULL,
    created_at  double precision NOT NULL,
    updated_at  double precision NOT NULL,
    started_at  double precision,
    finished_at double precision,
    worker_id   bigint,
    pgid        integer,
    pgid_start  bigint,
    exit_code   integer,
    last_error  text,
    delay       double precision,
    due_boot    text,
    due_mono    double precision,
    cancel_requested_at double precision
);
-- Claim order among claimable jobs; partial, so millions of finished rows cost nothing.
CREATE INDEX jobs_ready ON jobs (priority DESC, run_at, seq) WHERE state IN ('pending', 'failed');
CREATE INDEX jobs_processing ON jobs (worker_id) WHERE state = 'processing';
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE INDEX jobs_queue_state ON jobs (queue, state, seq);
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE state IN ('completed', 'dead', 'cancelled');

CREATE TABLE job_output (
    seq    bigint PRIMARY KEY REFERENCES jobs (seq) ON DELETE CASCADE,
    stdout bytea NOT NULL,
    stderr bytea NOT NULL
);

CREATE TABLE job_counts (queue text NOT NULL, state text NOT NULL, n bigint NOT NULL, PRIMARY KEY (queue, state));
CREATE TABLE job_count_deltas (queue text NOT NULL, state text NOT NULL, n bigint NOT NULL);
CREATE TABLE job_runs (queue text NOT NULL, outcome text NOT NULL, n bigint NOT NULL, PRIMARY KEY (queue, outcome));
CREATE TABLE job_run_deltas (queue text NOT NULL, outcome text NOT NULL, n bigint NOT NULL);

CREATE FUNCTION jobs_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, n) SELECT queue, state, count(*) FROM new_rows GROUP BY queue, state;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_insert();

CREATE FUNCTION jobs_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (queue, state, n) SELECT queue, state, -count(*) FROM old_rows GROUP BY queue, state;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_delete();

-- How runs ended, by queue (as SQLite's jobs_count_runs): a processing job that leaves processing.
CREATE FUNCTION jobs_count_update() RETURNS trigger LANGUAGE plpgsql AS $$""" + _COUNT_UPDATE.replace("RUNS_FILTER", "").replace("RECOVERED_WHEN", _LOST_TEXT) + """
CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_update();

-- A worker of this or another host. Its heartbeat_at is on the server's clock; heartbeat_mono
-- on the CLOCK_MONOTONIC of its own boot (compared only by workers of that boot).
CREATE TABLE workers (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- one incarnation; never reused
    name           text NOT NULL UNIQUE,
    host           text NOT NULL,
    boot_id        text NOT NULL,
    pid            integer NOT NULL,
    pid_start      bigint,
    slots          integer NOT NULL,
    queues         text NOT NULL DEFAULT '',
    unit           text,
    started_at     double precision NOT NULL,
    heartbeat_at   double precision NOT NULL,
    draining_since double precision,
    heartbeat_mono double precision,
    beats          bigint NOT NULL DEFAULT 0,
    pid_ns         text,
    uid            integer
);

CREATE TABLE config (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE queues (name text PRIMARY KEY, paused_at double precision);
CREATE TABLE leases (name text PRIMARY KEY, holder bigint NOT NULL, expires_at double precision NOT NULL);
""",
    # The counter triggers' functions name their tables bare: they get the schema as their own
    # search_path, since a connection through a pooler in transaction mode has the default one.
    2: """
ALTER FUNCTION jobs_count_insert() SET search_path = queuectl;
ALTER FUNCTION jobs_count_delete() SET search_path = queuectl;
ALTER FUNCTION jobs_count_update() SET search_path = queuectl;
""",
    # As SQLite's step 5: a job given back unstarted (started_at NULL) made no run.
    3: "CREATE OR REPLACE FUNCTION jobs_count_update() RETURNS trigger LANGUAGE plpgsql"
       " SET search_path = queuectl AS $$" + _COUNT_UPDATE.replace("RUNS_FILTER", " AND n.started_at IS NOT NULL")
                                             .replace("RECOVERED_WHEN", _LOST_TEXT),
    # As SQLite's step 6: idempotency keys, held by at most one job that has not ended.
    4: f"ALTER TABLE jobs ADD COLUMN key text; CREATE UNIQUE INDEX jobs_key_held ON jobs (key) WHERE {KEY_HELD_V6};",
    # As SQLite's step 7: dependencies and the blocked state, and output written while a job runs.
    # The trigger is a row trigger whose function's statements each take a fresh snapshot (a
    # VOLATILE function's, in READ COMMITTED): so a completion that waited for an enqueue's lock on
    # the dependency (queuectl.store.jobs._dependencies) sees the dependant that enqueue committed.
    5: f"""
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'processing', 'completed', 'failed', 'dead', 'cancelled', 'blocked'));
ALTER TABLE jobs ADD COLUMN blockers integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN dependants integer NOT NULL DEFAULT 0;
DROP INDEX jobs_key_held;
CREATE UNIQUE INDEX jobs_key_held ON jobs (key) WHERE {KEY_HELD};
CREATE TABLE job_deps (
    seq       bigint NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    after_seq bigint NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    PRIMARY KEY (seq, after_seq)
);
CREATE INDEX job_deps_after ON job_deps (after_seq, seq);
ALTER TABLE job_output ADD COLUMN attempt integer;
ALTER TABLE job_output ADD COLUMN stdout_total bigint;
ALTER TABLE job_output ADD COLUMN stderr_total bigint;
CREATE FUNCTION jobs_dependants() RETURNS trigger LANGUAGE plpgsql SET search_path = queuectl AS $$
BEGIN
    IF NEW.state = 'completed' THEN
        {RELEASE_DEPENDANTS};
    ELSE
        {CANCEL_DEPENDANTS};
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_dependants AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (NEW.dependants <> 0 AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('completed', 'dead', 'cancelled') AND NOT ({CASCADED}))
    EXECUTE FUNCTION jobs_dependants();
""",
    # As SQLite's step 8: schedules and limits. (As released, this step also created claim_limited, with the
    # due rule's step tolerance written as 1.0 and the rate window on the wall clock alone; step 7 replaces it,
    # in the same transaction as this step for a database older than version 6, so only step 7 holds it now.)
    6: SCHEDULES_LIMITS.replace("SCHEDULE_PK", "text PRIMARY KEY").replace("REAL_T", "double precision")
                       .replace("INT_T", "bigint"),
    # As SQLite's step 9: rate windows on the monotonic clock (START_CLOCKS). (As released, this step also replaced
    # claim_limited with the time rules of queuectl.store.timing rendered in; step 8 replaces it, in the same
    # transaction as this step for a database older than version 7, so only step 8 holds it now.)
    7: START_CLOCKS.replace("REAL_T", "double precision"),
    # As released, this step replaced claim_limited, a plpgsql function that kept the queue limits in a claim, with
    # every shared fragment rendered in; step 14 drops it, in the same transaction as this step for a database
    # older than version 8, so this step does nothing now.
    8: "SELECT 1",
    # As SQLite's step 10: outcome codes, a recovered run told by jobs.end_code rather than its error text.
    9: "ALTER TABLE jobs ADD COLUMN end_code text; CREATE OR REPLACE FUNCTION jobs_count_update() RETURNS trigger"
       " LANGUAGE plpgsql SET search_path = queuectl AS $$"
       + _COUNT_UPDATE.replace("RUNS_FILTER", " AND n.started_at IS NOT NULL")
                      .replace("RECOVERED_WHEN", f"n.end_code = '{RECOVERED}'"),
    # As SQLite's step 11: activity history (queuectl.store.activity), its deltas appended by a statement trigger
    # beside the counters' and folded by PostgresStore.maintain.
    10: f"""
CREATE TABLE activity (
    {activity.table("double precision", "bigint")}
);
CREATE INDEX activity_minute ON activity (minute);
CREATE TABLE activity_deltas (
    {activity.table("double precision", "bigint", primary_key=False)}
);
""" + activity.postgres_trigger(),
    # As SQLite's step 12: workers that ended, kept for `status` (STOPPED_WORKERS).
    11: STOPPED_WORKERS.replace("SEQ_PK", "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
                       .replace("REAL_T", "double precision").replace("INT_T", "bigint"),
    # As SQLite's step 13: finding jobs by key (SEARCH_INDEXES); and by id prefix, a range over the ids in byte
    # order ("C" collation), which the unique index on id, in the database's collation, does not keep.
    12: SEARCH_INDEXES + 'CREATE INDEX jobs_id_c ON jobs (id COLLATE "C");\n',
    # As SQLite's step 14: a job's attempts that ended without completing (JOB_ATTEMPTS). A row trigger whose WHEN,
    # evaluated without calling the function, is false on a completion: the success path queues no trigger event
    # (where the statement trigger's work would join the transition tables again for every exchange).
    13: JOB_ATTEMPTS.replace("INT_T", "bigint").replace("REAL_T", "double precision").replace("WITHOUT_ROWID", "")
        + "CREATE FUNCTION jobs_attempts() RETURNS trigger LANGUAGE plpgsql SET search_path = queuectl AS $$\n"
          f"BEGIN\n    {KEEP_ATTEMPT};\n    RETURN NULL;\nEND $$;\n"
          f"CREATE TRIGGER jobs_attempts AFTER UPDATE OF state ON jobs FOR EACH ROW WHEN ({ATTEMPT_ENDED})\n"
          "    EXECUTE FUNCTION jobs_attempts();\n",
    # The limited claim is one Python function on both engines (queuectl.store.limits.claim_within_limits), no
    # longer also a plpgsql function of the same rules.
    14: "DROP FUNCTION IF EXISTS claim_limited(bigint, text[], integer, integer, double precision, text,"
        " double precision, double precision, text[]);\n",
}

SCHEMA_VERSION = max(MIGRATIONS)
