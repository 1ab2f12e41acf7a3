"""The worker's rules for a failing database, in-process: a real SQLite store, a monotonic clock the test moves.

Liveness after an outage (every other worker gets stale-after from the first heartbeat that
works again, however short the outage) and the watchdog rule (the loop pings while the
database is unavailable, and only then: queuectl.worker's docstring).
"""

from __future__ import annotations

import os

import pytest

from queuectl.host import procs
from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable, InvalidInput
from queuectl.domain.models import JobState
from queuectl.domain.jobspec import parse_job
from queuectl.store import SqliteStore
from queuectl.worker import Worker
from support.inprocess import Notifier, stop_runner
from support.worker_steps import claim

HEARTBEAT, STALE_AFTER = 0.2, 1.5


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(str(tmp_path / "q.db"))
    s.set_setting("heartbeat-interval", str(HEARTBEAT))
    s.set_setting("stale-after", str(STALE_AFTER))
    yield s
    s.close()


@pytest.fixture
def worker(store, clock):
    w = Worker(store, "a", monotonic=clock, notifier=Notifier())
    yield w
    stop_runner(w.runner)


def peer_with_a_job(store, clock) -> int:
    """Register a live worker of this host and boot (this process's pid) beating now; it claims job "b-job"."""
    info = {"name": "b", "host": procs.hostname(), "boot_id": procs.boot_id(), "pid": os.getpid(),
            "pid_start": procs.process_start_time(os.getpid()), "pid_ns": procs.pid_namespace(), "slots": 1,
            "queues": []}
    now = Instant(store.clock(), clock(), procs.clock_domain())
    store.enqueue([parse_job('{"id": "b-job", "command": "true"}', now.wall)], now)
    peer, _ = store.register_worker(info, now)
    assert [j.id for j in claim(store, peer, [], 1, now)] == ["b-job"]
    return peer


def test_a_short_outage_gives_every_other_worker_stale_after_from_its_end(store, clock, worker):
    worker.register()
    peer = peer_with_a_job(store, clock)
    clock.now += 0.3
    assert worker._heartbeat()
    worker.outage.failed(DatabaseUnavailable("cannot connect to database: the server is down"), 0)
    # Back 1.3 s after this worker's last heartbeat: too short a gap to count as a held-up heartbeat
    # (2 x heartbeat-interval + 1 s), while the peer, silent for 1.6 s, may reconnect later than this one.
    clock.now += 1.3
    assert worker._heartbeat()
    assert store.get_job("b-job").state == JobState.PROCESSING and store.worker_by_name("b") is not None
    # The grace runs from the end of the outage: a peer that stays silent is recovered after stale-after.
    worker.outage.works(worker.now)
    clock.now += STALE_AFTER - 0.1
    assert worker._heartbeat() and store.worker_by_name("b") is not None
    clock.now += 0.2
    assert worker._heartbeat()
    assert store.worker_by_name("b") is None and store.get_job("b-job").last_error == "worker lost", peer


@pytest.mark.parametrize("error, pings", [
    (DatabaseUnavailable("lost the connection to database postgresql://h/q"), 1),
    (DatabaseUnavailable("database /q.db: database or disk is full"), 1),
    (DatabaseError("database postgresql://h/q: cannot execute UPDATE in a read-only transaction"), 0),
    (InvalidInput("cannot write to database /q.db: attempt to write a readonly database"), 0),
], ids=["lost-connection", "disk-full", "read-only-server", "read-only-file"])
def test_the_watchdog_is_pinged_while_the_database_is_unavailable_and_only_then(worker, clock, error, pings):
    worker.outage.failed(error, 0)
    clock.now += 12.4
    assert worker.notifier.pings == pings
    assert worker._status_line() == ("database unavailable for 12 s; 0 job(s) running and 0 result(s) held;"
                                     " 0 done, 0 failed")


def test_a_sqlite_file_locked_elsewhere_for_the_whole_busy_timeout_is_unavailable(tmp_path):
    import sqlite3

    path = str(tmp_path / "q.db")
    SqliteStore(path).close()
    s = SqliteStore(path, busy_timeout=0.1)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(DatabaseUnavailable, match="database is locked"):
            s.set_setting("max-retries", "5")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        s.close()
