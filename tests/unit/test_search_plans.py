"""The indexes a search reads (queuectl.store.search), read from each engine's own plans: each filter field
alone, and state with queue, reads an index and never every job; a text filter scans, as documented. SQLite's
planner has no statistics, so its plan here is its plan with a million jobs; PostgreSQL's is checked with
sequential scans priced out (its planner chooses by statistics; the point is that the index serves the query)."""

from __future__ import annotations

import sqlite3

import pytest

from queuectl.domain.models import JobState
from queuectl.store import open_store
from queuectl.store.jobfilter import JobFilter
from support.worker_steps import NOW, new_job

#: Each filter, and what its page's and its count's plans must name (SQLite, PostgreSQL).
INDEXED = [
    (JobFilter(state=JobState.PENDING), "jobs_state", "jobs_state"),
    (JobFilter(queue="q1"), "jobs_queue_state", "jobs_queue_state"),
    (JobFilter(state=JobState.DEAD, queue="q1"), "jobs_queue_state", "Index"),  # or jobs_finished: its choice
    (JobFilter(key="k3"), "jobs_key", "jobs_key"),
    (JobFilter(after="j5"), "job_deps_after", "job_deps_after"),
    (JobFilter(id_prefix="j1"), "sqlite_autoindex_jobs_1 (id>? AND id<?)", "jobs_id_c"),
    (JobFilter(queue="q1", key="k3"), "jobs_key", "jobs_key"),
]


def statements(store, call) -> list:
    """Run `call(store)` and return the statements it ran on the store's connection: SQLite's sqlite3 connection
    (an attribute of the store) is wrapped, PostgreSQL's wrapper class (made anew for each use) recorded."""
    seen = []
    conn = store.c
    cls = type(conn)
    original = cls.execute

    def execute(self, sql, params=()):
        seen.append((sql, params))
        return original(self, sql, params)

    if isinstance(conn, sqlite3.Connection):
        class Recorder:
            def execute(self, sql, params=()):
                seen.append((sql, params))
                return conn.execute(sql, params)

            def __getattr__(self, name):
                return getattr(conn, name)

        store.c = Recorder()
        try:
            call(store)
        finally:
            store.c = conn
    else:
        cls.execute = execute
        try:
            call(store)
        finally:
            cls.execute = original
    return seen


@pytest.fixture
def filled(db):
    """A store with 300 jobs in 3 queues, 30 of them with keys, and 3 after j5."""
    with open_store(db) as store:
        store.enqueue([new_job(id=f"j{i}", queue=f"q{i % 3}", **({"key": f"k{i}"} if i % 10 == 3 else {}))
                       for i in range(300)], NOW)
        store.enqueue([new_job(id=f"d{i}", after="j5") for i in range(3)], NOW)
        yield store


def main_statement(store, call) -> tuple:
    """The last statement `call(store)` runs on the jobs, leaving out the read of the found jobs' dependencies."""
    return [s for s in statements(store, call) if "FROM jobs" in s[0] and "job_deps d JOIN" not in s[0]][-1]


def sqlite_plan(store, sql, params) -> str:
    return "\n".join(r[3] for r in store.c.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall())


@pytest.mark.parametrize("f, index, _", INDEXED)
def test_sqlite_reads_an_index_for_each_filter(filled, f, index, _):
    for call in (lambda s: s.find_jobs(f, 10**9, 50), lambda s: s.count_jobs(f)):
        sql, params = main_statement(filled, call)
        plan = sqlite_plan(filled, sql, params)
        assert index in plan, plan
        assert "SCAN jobs" not in plan, plan


def test_sqlite_scans_for_text_as_documented(filled):
    [(sql, params)] = statements(filled, lambda s: s.count_jobs(JobFilter(text="true")))
    assert "SCAN jobs" in sqlite_plan(filled, sql, params)


def test_sqlite_reads_an_id_prefix_that_begins_many_ids_in_seq_order(filled, monkeypatch):
    from queuectl.store import search

    monkeypatch.setattr(search, "PREFIX_SORT_MOST", 10)  # "j1" begins 111 of the ids
    sql, params = statements(filled, lambda s: s.find_jobs(JobFilter(id_prefix="j1"), None, 5))[-2]
    plan = sqlite_plan(filled, sql, params)
    assert "TEMP B-TREE" not in plan and "autoindex" not in plan, plan  # no sort of the 111
    assert [j.id for j in filled.find_jobs(JobFilter(id_prefix="j1"), None, 3)] == ["j199", "j198", "j197"]


@pytest.mark.parametrize("f, _, index", INDEXED)
def test_postgresql_can_read_an_index_for_each_filter(pg_uri, f, _, index):
    with open_store(pg_uri) as store:
        store.enqueue([new_job(id=f"j{i}", queue=f"q{i % 3}", key=f"k{i}") for i in range(20)], NOW)
        store.enqueue([new_job(id="d1", after="j5")], NOW)
        store.c.execute("SET enable_seqscan = off")
        for call in (lambda s: s.find_jobs(f, 10**9, 50), lambda s: s.count_jobs(f)):
            sql, params = main_statement(store, call)
            plan = "\n".join(r[0] for r in store.c.execute(f"EXPLAIN {sql}", params).fetchall())
            assert index in plan, plan
            assert "Seq Scan on jobs" not in plan, plan
