"""What only the SQLite store has: the file, its pragmas, locks, migrations from older schemas, space reclaim.
And what the engine keeps in its tables that the interface does not show (a purged job's output, the rate
limit's expired claims), read here through the engine's own connection; test_postgres.py runs the same tests
on PostgreSQL (it imports them)."""

import os
import sqlite3
import threading
import time

import pytest

from queuectl.api.database import OPTION, Database
from queuectl.api.starting import worker_store
from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, InvalidInput
from queuectl.domain.models import JobState
from queuectl.store import SqliteStore, timing
from queuectl.store.request import Outcome
from queuectl.store.limits import RATE_SLACK
from queuectl.store.sqlite.schema import APPLICATION_ID, SCHEMA_VERSION

from support.worker_steps import NOW, A, add, claim, failed_once, finish, finished_jobs, is_ready, register


def test_new_database_is_versioned_wal_and_marked(db):
    SqliteStore(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental: freed pages can be returned


def test_a_new_database_opened_while_another_process_holds_a_lock_waits_for_it(db):
    # Switching to WAL takes an exclusive lock and SQLite runs no busy handler for it: two
    # workers opening a new database at once saw "database is locked" before the store waited.
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # a write lock, in rollback mode: what another opener holds
    releaser = threading.Timer(0.3, holder.execute, ("COMMIT",))
    releaser.start()
    started = time.monotonic()
    try:
        SqliteStore(db).close()
    finally:
        releaser.join()
        holder.close()
    assert time.monotonic() - started >= 0.25  # it waited for the lock rather than failing
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_every_connection_commits_with_synchronous_full_workers_included(db):
    # A worker's exchange records ends: under NORMAL a power cut could forget completions a reader had seen.
    assert SqliteStore(db).conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    worker = worker_store(Database(db, OPTION), wait=False, say=print)
    assert worker.conn.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_claim_and_has_work_read_the_ready_index_in_order(store):
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)  # SQL with its parameters filled in
    w = register(store)
    claim(store, w, ["a"], 1, NOW)
    store.has_work([], NOW)
    store.conn.set_trace_callback(None)
    checked = [sql for sql in statements if "jobs_ready" in sql]
    assert len(checked) == 2
    for sql in checked:
        plan = " | ".join(r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql))
        # Covering: the due-time, state and queue filters read the index alone, not each row.
        assert "USING COVERING INDEX jobs_ready" in plan and "TEMP B-TREE" not in plan, plan


def test_a_reschedule_by_an_older_queuectl_falls_back_to_the_wall_clock(store):
    failed_once(store, Instant(NOW, 100.0, A))
    # A version-2 worker rewrites run_at alone (a later retry); the monotonic due time it
    # leaves behind must not make the job due early.
    store.conn.execute("UPDATE jobs SET run_at = ? WHERE id = 'r'", (NOW + 60,))
    assert tuple(store.conn.execute("SELECT delay, due_boot, due_mono FROM jobs").fetchone()) == (None, None, None)
    assert not is_ready(store, Instant(NOW + 10, 200.0, A))
    assert is_ready(store, Instant(NOW + 60, 200.0, A))


def test_not_a_database_and_other_programs_databases_are_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 200)
    with pytest.raises(InvalidInput, match="not a queuectl database"):
        SqliteStore(str(junk))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)")
    before = other.read_bytes()
    with pytest.raises(InvalidInput, match="another program"):
        SqliteStore(str(other))
    assert other.read_bytes() == before


def test_a_newer_schema_is_refused(db):
    SqliteStore(db).close()
    sqlite3.connect(db, isolation_level=None).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(DatabaseError, match="newer"):
        SqliteStore(db)


def test_missing_directory_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="does not exist"):
        SqliteStore(str(tmp_path / "nope" / "q.db"))


def test_a_version_1_database_migrates_forward_keeping_its_jobs(db):
    from queuectl.store.sqlite.schema import MIGRATIONS
    from queuectl.store.sqlite.store import _statements

    conn = sqlite3.connect(db, isolation_level=None)
    for statement in _statements(MIGRATIONS[1]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("INSERT INTO jobs (id, queue, command, state, run_at, created_at, updated_at)"
                 " VALUES ('old', 'default', 'true', 'pending', 0, 0, 0)")
    conn.execute("INSERT INTO jobs (id, queue, command, state, run_at, created_at, updated_at, exit_code)"
                 " VALUES ('done', 'default', 'echo hi', 'completed', 0, 0, 0, 0)")
    conn.execute("INSERT INTO job_output (seq, stdout, stderr) VALUES (2, x'6869', x'')")
    conn.close()
    store = SqliteStore(db)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14
    assert "end_code" in [r[1] for r in store.conn.execute("PRAGMA table_info(jobs)")]  # version 10: outcome codes
    assert store.get_job("old").key is None  # version 6: keys
    assert store.get_job("old").after == ()  # version 7: dependencies
    assert store.get_job("old").state == JobState.PENDING
    assert store.get_job("done", output=True).stdout == b"hi"  # the table rebuild kept its output
    assert store.job_attempts("done") == []  # version 14: ended attempts, none kept before
    assert store.counts() == {"default": {"pending": 1, "completed": 1}}
    assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    w = register(store, now=Instant(NOW, 7.0, A))
    store.mark_draining(w, NOW)
    assert store.worker_by_name("w1").draining_since == NOW
    assert store.worker_by_name("w1").heartbeat_mono == 7.0
    # A job scheduled before version 3 keeps its wall-clock due time (run_at 0: due).
    assert [j.id for j in claim(store, w, [], 1, Instant(NOW, 7.0, A))] == ["old"]


def _jobs_with_output(store, n: int, size: int) -> None:
    """n completed jobs j0... of `size` random bytes of output each (random: the file cannot compress them)."""
    for i in range(n):
        add(store, id=f"j{i}")
    w = register(store, slots=n)
    claim(store, w, [], n, NOW)
    finish(store, w, [Outcome(f"j{i}", True, 0, None, os.urandom(size), b"") for i in range(n)], NOW)


def _free_pages(store) -> int:
    return store.conn.execute("PRAGMA freelist_count").fetchone()[0]


def _pages(store) -> int:
    return store.conn.execute("PRAGMA page_count").fetchone()[0]


def test_purge_gives_freed_pages_back_once_a_quarter_of_the_file_is_free_at_most_every_10_s(store, db, monkeypatch):
    from queuectl.store.sqlite import space as sqlite_store

    _jobs_with_output(store, 8, 500_000)
    old = {"completed": 0}
    assert store.purge(old, Instant(NOW + 1, 100.0, A), limit=1) == 1  # an eighth of the file freed
    assert _free_pages(store) > 100  # kept for reuse
    assert os.path.getsize(db + "-wal") == 0  # the WAL was cut back all the same
    pages = _pages(store)
    assert store.purge(old, Instant(NOW + 1, 109.0, A), limit=3) == 3  # half the file free, 9 s later
    assert _free_pages(store) > 400 and _pages(store) == pages  # nothing given back yet
    assert os.path.getsize(db + "-wal") > 0  # nor the WAL cut back
    monkeypatch.setattr(sqlite_store, "RECLAIM_PAGES", 100)  # a cap that 4 MB of free pages reach
    assert store.purge(old, Instant(NOW + 1, 110.0, A), limit=1) == 1  # 10 s after the first
    assert _pages(store) == pages - 100 and os.path.getsize(db + "-wal") == 0
    free = _free_pages(store)
    assert store.purge(old, Instant(NOW + 1, 200.0, A), queue="other") == 0  # nothing deleted: nothing given back
    assert (_free_pages(store), _pages(store)) == (free, pages - 100)
    monkeypatch.undo()
    assert store.purge(old, Instant(NOW + 1, 300.0, A)) == 3
    assert _free_pages(store) == 0 and os.path.getsize(db) < 4 * 4096 * 100  # every page, the file a few pages
    assert os.path.getsize(db + "-wal") == 0


def test_compact_gives_every_free_page_back_now(store, db):
    _jobs_with_output(store, 8, 500_000)
    assert store.purge({"completed": 0}, Instant(NOW + 1, 100.0, A), limit=1) == 1  # too few to give back
    size = os.path.getsize(db)
    assert _free_pages(store) > 100
    assert store.compact() is None  # a new database: incremental already, nothing to convert
    assert _free_pages(store) == 0 and os.path.getsize(db) < size - 400_000
    assert os.path.getsize(db + "-wal") == 0  # cut back by the TRUNCATE checkpoint


# -- wake-ups after commit ----------------------------------------------------------------------------


@pytest.fixture
def wake_socket(store):
    """A wake-up socket (queuectl.host.wake) registered as a worker of this host and boot, as a real worker's is."""
    from queuectl.host import procs, wake

    sock = wake.listen(os.getpid())
    assert sock is not None
    register(store, name="local", host=procs.hostname(), boot_id=procs.boot_id(), pid=os.getpid())
    yield sock
    sock.close()


def _pokes(sock) -> int:
    """How many wake-ups wait on `sock` (consumed)."""
    n = 0
    while True:
        try:
            sock.recv(16)
        except BlockingIOError:
            return n
        n += 1


def test_writes_that_make_work_wake_this_hosts_workers_once_committed(store, db, wake_socket, monkeypatch):
    from queuectl.host import wake

    seen, real = [], wake.poke

    def poke(pids):  # what another process sees when the wake-up is sent
        with SqliteStore(db) as other:
            seen.append({j.id: j.state.value for j in other.list_jobs()})
        return real(pids)

    monkeypatch.setattr(wake, "poke", poke)
    add(store, id="run", max_retries=0)
    assert (_pokes(wake_socket), seen) == (1, [{"run": "pending"}])  # committed before the poke
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [Outcome("run", False, 1, "exit code 1", b"", b"")], NOW)  # dead
    add(store, id="later", delay=3600)
    assert _pokes(wake_socket) == 1
    store.set_paused(["q"], True, NOW)
    store.cancel(["later"], NOW)  # pending: cancelled at once, no worker has anything to do
    assert _pokes(wake_socket) == 0
    for write in (lambda: store.dlq_retry(["run"], NOW), lambda: store.retry(["later"], NOW),
                  lambda: store.set_paused(["q"], False, NOW)):
        write()
        assert _pokes(wake_socket) == 1
    store.set_paused(["q"], False, NOW)  # not paused: nothing changed
    claim(store, w, [], 1, NOW)
    assert _pokes(wake_socket) == 0
    assert store.cancel(["run"], NOW)[0].result == "requested"  # processing: its worker stops it when woken
    assert _pokes(wake_socket) == 1 and len(seen) == 6  # one wake-up per write that made work


class _FailingCommit:
    """A connection whose COMMIT fails (as on an I/O error) and whose other statements run."""

    def __init__(self, conn):
        self._conn = conn

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def execute(self, sql, *args):
        if sql == "COMMIT":
            raise sqlite3.OperationalError("disk I/O error")
        return self._conn.execute(sql, *args)


def test_a_rolled_back_write_wakes_no_one(store, wake_socket, monkeypatch):
    monkeypatch.setattr(store, "conn", _FailingCommit(store.conn))
    with pytest.raises(DatabaseError, match="disk I/O error"):
        add(store, id="lost")
    assert _pokes(wake_socket) == 0
    monkeypatch.undo()
    assert store.list_jobs() == []  # rolled back
    add(store, id="kept")  # the next write that commits does wake
    assert _pokes(wake_socket) == 1


def test_a_failing_wake_up_never_fails_the_write(store, wake_socket, monkeypatch):
    from queuectl.host import wake

    def no_socket(pids):
        raise OSError(24, "Too many open files")

    def locked(host):
        raise DatabaseError("database is locked")

    monkeypatch.setattr(wake, "poke", no_socket)
    assert add(store, id="a") == "a"
    monkeypatch.setattr(store, "worker_pids", locked)
    assert add(store, id="b") == "b"
    assert [j.id for j in store.list_jobs()] == ["b", "a"] and _pokes(wake_socket) == 0


# -- what the engine keeps that the interface does not show (test_postgres.py runs these on PostgreSQL) --------


def test_purge_deletes_the_output_of_the_jobs_it_deletes(store):
    finished_jobs(store, {"c": ("q", "ok"), "f": ("q", "fail")})
    assert store.purge({"completed": 10}, NOW + 11) == 1
    assert [r[0] for r in store.c.execute("SELECT seq FROM job_output")] == [store.get_job("f").seq]


def test_expire_forgets_exactly_the_claims_whose_age_is_past_the_window(store):
    """timing.EXPIRE (the age solved for each clock's column, for the indexes) and timing.start_age agree: of
    claims of this boot, of another, and of none (recorded before the migration), stepped or not, the ones
    deleted are those start_age puts at the window and slack or beyond."""
    now = Instant(NOW, 100.0, "this-boot")
    rows = [(NOW - 100, "this-boot", 99.0), (NOW + 100, "this-boot", 94.6), (NOW, "this-boot", 94.4),
            (NOW - 5.4, "other", 1e6), (NOW - 5.6, "other", 0.0), (NOW + 3600, "other", 0.0), (NOW - 6, None, None),
            (NOW - 5, None, None)]
    for at_, boot, mono in rows:
        store.c.execute("INSERT INTO queue_starts (queue, at, boot, mono) VALUES ('rq', ?, ?, ?)", (at_, boot, mono))
    values = {**timing.clock_values(now), "queue": "rq", "window": 5.0, "slack": RATE_SLACK}
    age_sql, params = timing.bind(f"SELECT at, boot, mono, {timing.start_age()} AS age FROM queue_starts", values)
    keep = sorted((r["at"], r["boot"] or "") for r in store.c.execute(age_sql, params).fetchall()
                  if r["age"] < 5.0 + RATE_SLACK)
    for statement in timing.EXPIRE:
        store.c.execute(*timing.bind(statement, values))
    assert sorted((r[0], r[1] or "") for r in store.c.execute("SELECT at, boot FROM queue_starts")) == keep
    assert len(keep) == 5
