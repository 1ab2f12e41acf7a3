"""`queuectl wait`, on SQLite and PostgreSQL: exit 0 when every job completed, 1 when one ended dead
or cancelled (a line each) or an id is unknown, 124 on --timeout, 2 for usage; and a waiter in
another process notices an end recorded meanwhile."""

from __future__ import annotations

import json
import time

import pytest

from support.cli import assert_error, configure
from queuectl.api.outage import Patience
from queuectl.api.waiting import Attempts
from queuectl.store.request import Outcome
from support.worker_steps import NOW, add, bad, claim, ended, finish, ok, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


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


# -- each failed attempt, one line (queuectl.api.waiting.Attempts) ----------------------------------------


def attempts(store):
    """An Attempts of `store` and the lines it says."""
    lines: list[str] = []
    return Attempts(store, Patience(lambda line: None, limit=0), lines.append), lines


def test_each_failed_attempt_is_said_once_in_order_with_its_error_and_its_retry(db, store):
    store.set_setting("max-retries", "2")
    store.set_setting("backoff-base", "3")
    add(store, id="j1", command="exit 3")
    said, lines = attempts(store)
    w = register(store)
    read = lambda: said.seen(store.get_job("j1"))  # noqa: E731
    read()
    claim(store, w, [], 1, NOW)
    read()  # running its first attempt: nothing yet
    assert lines == []
    finish(store, w, [bad("j1", 3)], NOW)
    read()
    read()  # said once
    assert lines == ["job j1: attempt 1 of 3 failed (exit code 3): retry in 3 s"]
    claim(store, w, [], 1, NOW + 10)
    finish(store, w, [Outcome("j1", False, None, "killed by signal 9 (SIGKILL)", b"", b"")], NOW + 10)
    claim(store, w, [], 1, NOW + 100)  # its failed state not seen: the retry started within a poll
    read()
    finish(store, w, [bad("j1", 4)], NOW + 100)
    read()
    assert lines[1:] == ["job j1: attempt 2 of 3 failed (killed by signal 9 (SIGKILL)): retried",
                         "job j1: attempt 3 of 3 failed (exit code 4): dead"]
    store.retry(["j1"], NOW + 200)  # attempts back to 0: the count starts again
    read()
    claim(store, w, [], 1, NOW + 200)
    finish(store, w, [bad("j1", 5)], NOW + 200)
    read()
    assert lines[3:] == ["job j1: attempt 1 of 3 failed (exit code 5): retry in 3 s"]


def test_the_first_read_says_only_a_failure_waiting_for_its_retry_and_the_job_limit_wins(db, store):
    add(store, id="waiting", command="exit 1", max_retries=5)
    add(store, id="done", command="exit 1", max_retries=0)
    add(store, id="fine")
    w = register(store)
    claim(store, w, [], 3, NOW)
    finish(store, w, [bad("waiting", 1), bad("done", 2), ok("fine")], NOW)
    said, lines = attempts(store)
    for job in store.jobs_by_id(["waiting", "done", "fine"]).values():
        said.seen(job)
    assert lines == ["job waiting: attempt 1 of 6 failed (exit code 1): retry in 2 s"]  # dead before: not said


def test_a_line_escapes_the_error_it_shows(db, store):
    add(store, id="odd", max_retries=0)
    w = register(store)
    said, lines = attempts(store)
    said.seen(store.get_job("odd"))
    claim(store, w, [], 1, NOW)
    finish(store, w, [Outcome("odd", False, None, "cannot start: /srv/\x1b[2J\ndir", b"", b"")], NOW)
    said.seen(store.get_job("odd"))
    assert lines == ["job odd: attempt 1 of 1 failed (cannot start: /srv/\\x1b[2J\\ndir): dead"]
