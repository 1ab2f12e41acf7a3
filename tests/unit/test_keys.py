"""Idempotency keys from the command line, on SQLite and PostgreSQL: `enqueue` of a key that a job
not yet ended holds adds nothing, prints that job's id and says so in one line; parallel enqueues
of one key add one job; `retry` refuses a job whose key another holds; bad keys are refused."""

from __future__ import annotations

import json
import subprocess

import pytest

from support.cli import QUEUECTL, assert_error
from support.engines import snapshot
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_a_held_key_prints_the_holder_and_exits_0(db, run_cli):
    first = run_cli("enqueue", '{"id": "backup-1", "command": "true", "key": "nightly"}')
    assert (first.exit_code, first.stdout, first.stderr) == (0, "backup-1\n", "")
    again = run_cli("enqueue", '{"id": "backup-2", "command": "true", "key": "nightly"}')
    assert (again.exit_code, again.stdout) == (0, "backup-1\n")
    assert again.stderr == "key 'nightly' is held by job backup-1 (pending); nothing added\n"
    shown = json.loads(run_cli("show", "backup-1", "--json").stdout)
    assert shown["key"] == "nightly"
    assert [j["id"] for j in json.loads(run_cli("list", "--json").stdout)] == ["backup-1"]
    assert ["key:", "nightly"] in [line.split() for line in run_cli("show", "backup-1").stdout.splitlines()]


def test_a_file_matches_a_key_held_by_an_earlier_line(db, run_cli):
    lines = "".join(json.dumps(j) + "\n" for j in (
        {"id": "a", "command": "true", "key": "k"}, {"id": "b", "command": "true"},
        {"id": "c", "command": "true", "key": "k"}))
    r = run_cli("enqueue", "--file", "-", input=lines)
    assert (r.exit_code, r.stdout) == (0, "a\nb\na\n")
    assert r.stderr == "line 3: key 'k' is held by job a (pending); nothing added\n"


@pytest.mark.parametrize("key, message", [
    ('""', "key must be 1-128"), ("5", "key must be 1-128"), (json.dumps("k" * 129), "key must be 1-128"),
    ('"has space"', "key must be 1-128"), ('["k"]', "key must be 1-128"),
])
def test_a_bad_key_is_refused_and_changes_nothing(db, run_cli, key, message):
    run_cli("enqueue", '{"id": "there", "command": "true"}')
    before = snapshot(db)
    assert_error(run_cli("enqueue", f'{{"command": "true", "key": {key}}}'), 2, message)
    assert snapshot(db) == before


def test_retry_of_a_job_whose_key_another_holds_is_refused(db, run_cli):
    run_cli("enqueue", '{"id": "old", "command": "true", "key": "k"}')
    run_cli("cancel", "old")
    run_cli("enqueue", '{"id": "new", "command": "true", "key": "k"}')
    before = snapshot(db)
    assert_error(run_cli("retry", "old"), 1, "key 'k' is held by job 'new' (pending)")
    assert snapshot(db) == before


def test_eight_parallel_enqueues_of_one_key_add_one_job_and_all_print_its_id(db, run_cli):
    run_cli("status")  # the schema exists before the race (creating it is not what is tested)
    procs = [subprocess.Popen([*QUEUECTL, "--db", db, "enqueue", json.dumps({"command": "true", "key": "once"})],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    results = [(p.wait(60), *p.communicate()) for p in procs]
    assert [code for code, _, _ in results] == [0] * 8, results
    ids = {out for _, out, _ in results}
    assert len(ids) == 1, results
    assert sum(1 for _, _, err in results if "is held by job" in err) == 7, results
    listed = json.loads(run_cli("list", "--json").stdout)
    assert [(j["id"] + "\n", j["key"]) for j in listed] == [(ids.pop(), "once")]


def test_status_lists_the_held_keys(db, run_cli):
    run_cli("enqueue", '{"id": "a", "command": "true", "key": "nightly"}')
    run_cli("enqueue", '{"id": "b", "command": "true", "key": "other"}')
    run_cli("enqueue", '{"id": "c", "command": "true"}')
    run_cli("cancel", "b")  # its key is free again
    status = run_cli.json("status")
    assert (status["keys"], status["keys_held"]) == ([{"key": "nightly", "id": "a", "state": "pending"}], 1)
    text = run_cli("status").stdout
    assert "Keys held (1)" in text and ["nightly", "a", "pending"] in [line.split() for line in text.splitlines()]
