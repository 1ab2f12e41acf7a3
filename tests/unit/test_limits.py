"""Queue limits: the command line (`queuectl limit`: bad input is one line, exit 2, nothing stored). The store's limits on both engines:
tests/unit/conformance/test_limits.py."""

from __future__ import annotations


import pytest

from support.cli import assert_error
from support.engines import snapshot
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


# -- the command line -----------------------------------------------------------------------------------


def test_limit_sets_lists_and_clears(run_cli):
    r = run_cli("limit", "build", "--concurrency", "2")
    assert (r.exit_code, r.stdout) == (0, "build: concurrency 2\n")
    r = run_cli("limit", "mail", "--rate", "30/1m")
    assert (r.exit_code, r.stdout) == (0, "mail: rate 30/1m\n")
    assert run_cli.json("limit") == [
        {"queue": "build", "concurrency": 2, "rate": None, "processing": 0},
        {"queue": "mail", "concurrency": None, "rate": {"count": 30, "window_seconds": 60.0}, "processing": 0}]
    lines = run_cli("limit").stdout.splitlines()
    assert lines[0].split() == ["QUEUE", "CONCURRENCY", "RATE", "PROCESSING"] and lines[2].split() == [
        "mail", "-", "30/1m", "0"]
    assert run_cli("limit", "mail").stdout.splitlines()[1].split()[0] == "mail"
    status = run_cli.json("status")
    assert status["limits"] == {q["queue"]: q for q in run_cli.json("limit")}  # limit --json's objects
    assert "LIMIT" in run_cli("status").stdout
    r = run_cli("limit", "build", "--clear")
    assert (r.exit_code, r.stdout) == (0, "build: no limits\n")
    assert [q["queue"] for q in run_cli.json("limit")] == ["mail"]


@pytest.mark.parametrize("args,fragment", [
    (["q", "--concurrency", "0"], "from 1 to 2147483647"),
    (["q", "--concurrency", "-1"], "from 1 to 2147483647"),
    (["q", "--concurrency", "99999999999999999999"], "from 1 to 2147483647"),  # more than a database integer
    (["q", "--rate", "99999999999999999999/1s"], "COUNT/DURATION"),
    (["q", "--rate", "5/367d"], "at most 366d"),
    (["q", "--rate", "5/forever"], "COUNT/DURATION"),
    (["q", "--concurrency", "two"], "not a valid integer"),
    (["q", "--rate", "5"], "COUNT/DURATION"),
    (["q", "--rate", "5/0s"], "COUNT/DURATION"),
    (["q", "--rate", "0/1m"], "COUNT/DURATION"),
    (["q", "--rate", "5/soon"], "--rate's window"),
    (["q", "--clear", "--concurrency", "1"], "--clear alone"),
    (["--concurrency", "1"], "give the QUEUE"),
    (["bad queue", "--concurrency", "1"], "queue names"),
])
def test_bad_limits_exit_2_and_store_nothing(run_cli, db, args, fragment):
    run_cli("limit", "keep", "--concurrency", "3")
    before = snapshot(db)
    assert_error(run_cli("limit", *args), 2, fragment)
    assert snapshot(db) == before
