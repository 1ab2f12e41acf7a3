"""`queuectl wait`, on SQLite and PostgreSQL: exit 0 when every job completed, 1 when one ended dead
or cancelled (a line each) or an id is unknown, 124 on --timeout, 2 for usage; and a waiter in
another process notices an end recorded meanwhile."""

from __future__ import annotations

import json
import time

import pytest

from conftest import assert_error, configure
from support.worker_steps import NOW, add, bad, claim, finish, ok, register


@pytest.fixture
def db(backend_db):
    return backend_db


def ended(store, job_id: str, outcome) -> None:
    """Run `job_id` to its end as a worker would record it: `outcome(job_id)` (ok or bad)."""
    w = register(store, f"w-{job_id}")
    assert [j.id for j in claim(store, w, [], 1, NOW)] == [job_id]
    finish(store, w, [outcome(job_id)], NOW)


def test_wait_for_completed_jobs_exits_0_and_json_shows_them(db, run_cli, store):
    for job_id in ("a", "b"):
        add(store, id=job_id)
        ended(store, job_id, ok)
    r = run_cli("wait", "a", "b")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "")
    r = run_cli("wait", "b", "a", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == [
        {"id": "b", "state": "completed", "exit_code": 0, "attempts": 1},
        {"id": "a", "state": "completed", "exit_code": 0, "attempts": 1}]


def test_a_dead_or_cancelled_job_exits_1_with_a_line_each(db, run_cli, store):
    configure(run_cli, ("max-retries", "0"))
    add(store, id="fine")
    ended(store, "fine", ok)
    add(store, id="broken")
    ended(store, "broken", lambda job_id: bad(job_id, 3))
    add(store, id="dropped")
    store.cancel(["dropped"], NOW)
    r = run_cli("wait", "fine", "broken", "dropped")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.splitlines() == ["job broken dead: exit code 3", "job dropped cancelled: cancelled"]


def test_an_unknown_id_exits_1_at_once_without_waiting(db, run_cli, store):
    add(store, id="running")  # never ends: the wait must not block on it
    r = run_cli("wait", "running", "nosuch", "other")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.splitlines() == ["queuectl: error: no job with id 'nosuch'",
                                     "queuectl: error: no job with id 'other'"]


def test_a_timeout_exits_124_and_json_shows_where_the_jobs_are(db, run_cli, store):
    add(store, id="done")
    ended(store, "done", ok)
    add(store, id="slow")
    began = time.monotonic()
    r = run_cli("wait", "slow", "done", "--timeout", "0.3", "--json")
    assert time.monotonic() - began >= 0.3
    assert r.exit_code == 124
    assert r.stderr == "queuectl: timed out after 0.3 s waiting for slow\n"
    assert [(j["id"], j["state"]) for j in json.loads(r.stdout)] == [("slow", "pending"), ("done", "completed")]
    r = run_cli("wait", "slow", "--timeout", "0")
    assert r.exit_code == 124


@pytest.mark.parametrize("args, message", [
    ((), "Missing argument"), (("a", "--timeout", "-1"), "--timeout"), (("a", "--timeout", "soon"), "--timeout")])
def test_bad_usage_exits_2(db, run_cli, store, args, message):
    assert_error(run_cli("wait", *args), 2, message)
