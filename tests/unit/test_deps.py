"""Dependencies between jobs (the `after` field) at the command line, on SQLite and PostgreSQL: unknown ids and
bad `after` values are refused with one line and change nothing, the commands show blocked jobs, and enqueues
after one job from many processes all wait for it. The store's rules: tests/unit/conformance/test_dependencies.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from support.cli import QUEUECTL, assert_error
from support.engines import snapshot
from queuectl.domain.models import JobState
from queuectl.store import open_store
from support.worker_steps import NOW, add, bad, claim, finish, register, run_one
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_enqueue_of_an_unknown_dependency_exits_1_and_adds_nothing(db, run_cli):
    run_cli("enqueue", '{"id": "a", "command": "true"}')
    before = snapshot(db)
    assert_error(run_cli("enqueue", '{"id": "b", "command": "true", "after": ["a", "ghost"]}'), 1,
                 "job b is after 'ghost', which is no job; nothing was enqueued")
    assert snapshot(db) == before


def test_a_file_may_name_earlier_lines_but_not_later_ones(db, run_cli):
    good = "".join(json.dumps(j) + "\n" for j in (
        {"id": "x", "command": "true"}, {"id": "y", "command": "true", "after": "x"},
        {"id": "z", "command": "true", "after": ["x", "y"]}))
    r = run_cli("enqueue", "--file", "-", input=good)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "x\ny\nz\n", "")
    before = snapshot(db)
    bad_order = "".join(json.dumps(j) + "\n" for j in (
        {"id": "p", "command": "true", "after": "q"}, {"id": "q", "command": "true"}))
    assert_error(run_cli("enqueue", "--file", "-", input=bad_order), 1, "line 1: job p is after 'q', which is no job")
    assert snapshot(db) == before


def test_enqueue_after_a_dead_job_adds_it_cancelled_with_one_line(db, run_cli, store):
    add(store, id="broken", max_retries=0)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("broken")], NOW)
    r = run_cli("enqueue", '{"id": "next", "command": "true", "after": "broken"}')
    assert (r.exit_code, r.stdout, r.stderr) == (0, "next\n", "job next is cancelled at once: dependency broken is dead\n")
    r = run_cli("enqueue", "--wait", '{"id": "then", "command": "true", "after": "broken"}')
    assert (r.exit_code, r.stdout) == (1, "then\n")


@pytest.mark.parametrize("after, message", [
    ("5", "after must be a job id or a list of job ids"), ('""', "after must be a job id"),
    ('["a", 3]', "after must be a job id"), ('{"a": 1}', "after must be a job id"),
    (json.dumps("x" * 129), "after must be a job id"), ('"self"', "job self cannot be after itself"),
    (json.dumps([f"j{i}" for i in range(1001)]), "after names more than 1000 jobs"),
])
def test_a_bad_after_is_refused_with_exit_2_and_changes_nothing(db, run_cli, after, message):
    run_cli("enqueue", '{"id": "a", "command": "true"}')
    before = snapshot(db)
    assert_error(run_cli("enqueue", f'{{"id": "self", "command": "true", "after": {after}}}'), 2, message)
    assert snapshot(db) == before


def test_the_commands_show_blocked_jobs_and_their_dependencies(db, run_cli):
    run_cli("enqueue", '{"id": "a", "command": "true"}')
    run_cli("enqueue", '{"id": "b", "command": "true", "after": "a"}')
    assert [j["id"] for j in run_cli.json("list", "--state", "blocked")] == ["b"]
    assert run_cli.json("show", "b")["after"] == ["a"]
    assert ["after:", "a"] in [line.split() for line in run_cli("show", "b").stdout.splitlines()]
    assert run_cli.json("status")["jobs"]["blocked"] == 1
    assert 'queuectl_jobs{queue="default",state="blocked"} 1' in run_cli("metrics").stdout
    r = run_cli("cancel", "--state", "blocked")
    assert r.exit_code == 0 and "b" in r.stdout
    r = run_cli("retry", "b")
    assert (r.exit_code, r.stdout) == (0, "b: blocked\n")


def test_parallel_enqueues_after_one_job_all_wait_for_it(db, run_cli):
    run_cli("enqueue", '{"id": "base", "command": "true"}')
    procs = [subprocess.Popen([*QUEUECTL, "--db", db, "enqueue", json.dumps({"id": f"d{i}", "command": "true",
                                                                            "after": "base"})],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(6)]
    assert [p.wait(60) for p in procs] == [0] * 6
    store = open_store(db)
    assert {j.state for j in store.jobs_by_id([f"d{i}" for i in range(6)]).values()} == {JobState.BLOCKED}
    w = register(store)
    run_one(store, w, "base", now=store.now())
    assert {j.state for j in store.jobs_by_id([f"d{i}" for i in range(6)]).values()} == {JobState.PENDING}
