"""Outcome codes, on SQLite and PostgreSQL: a run that recovery ended counts as recovered by its code
(jobs.end_code), not by its error text; the next run of that job counts by how it ended."""

from __future__ import annotations

import pytest

from queuectl.store import Outcome
from support.storeops import claim, finish
from unit.test_store import NOW, add, ok, register


@pytest.fixture
def db(backend_db):
    return backend_db


def test_a_recovered_job_that_runs_again_counts_that_run_by_how_it_ended(store):
    add(store, id="a", max_retries=3)
    lost = register(store, "lost")
    claim(store, lost, [], 1, NOW)
    store.recover(lost, store.worker_by_name("lost").seen, NOW)
    assert store.get_job("a").last_error == "worker lost"
    w = register(store, "w2")
    assert [j.id for j in claim(store, w, [], 1, NOW + 10_000)] == ["a"]  # due again after its backoff
    finish(store, w, [ok("a")], NOW + 10_000)
    assert store.run_counts() == {"default": {"recovered": 1, "completed": 1}}


def test_a_failure_whose_error_reads_worker_lost_is_no_recovery(store):
    add(store, id="a", max_retries=0)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [Outcome("a", False, None, "worker lost", b"", b"")], NOW)
    assert store.run_counts() == {"default": {"dead": 1}}
