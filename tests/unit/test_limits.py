"""Queue limits: the time rules of PostgreSQL's claim_limited written once and pinned, and the command line
(`queuectl limit`: bad input is one line, exit 2, nothing stored). The store's limits on both engines:
tests/unit/conformance/test_limits.py."""

from __future__ import annotations

import hashlib

import pytest

from support.cli import assert_error
from support.engines import snapshot
from queuectl.domain.clock import STEP_TOLERANCE
from queuectl.store import core as sql_module
from queuectl.store import fragments, timing
from queuectl.store.postgres.schema import MIGRATIONS, claim_limited
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


CLAIM_LIMITED_FINGERPRINT = "823120cf58269021"


def test_claim_limited_is_rendered_from_the_time_rules_written_once():
    """PostgreSQL's claim_limited holds each time rule as queuectl.store.timing writes it, the statements of
    SqlStore the same rules with ? placeholders; the step tolerance and rate slack appear nowhere else."""
    text = claim_limited()
    names = {**timing.PLPGSQL_CLOCK, "queue": "q", "window": "lim.rate_window", "slack": "p_slack"}
    for rule in (timing.due("j."), timing.REBASE, *timing.EXPIRE, timing.ahead("room", "p_free")):
        assert timing.render(rule, names) in text
    assert timing.render(timing.RECORD, {**names, "queue": "queue"}) in text
    names["worker"] = "p_worker"
    for fragment in (fragments.ready("j."), fragments.CLAIM_SET, fragments.allowed("room", "p_free", "n"),
                     fragments.CLAIM_ORDER, fragments.READY_STATES):
        assert timing.render(fragment, names) in text
    assert sql_module.DUE == timing.placeholders(timing.due())[0]
    assert f"+ {STEP_TOLERANCE}" in text and "{" not in text.replace("'{}'", "")  # every slot rendered
    assert any(step.endswith(text) for step in MIGRATIONS.values())  # a step installs it as rendered


def test_claim_limited_is_pinned_by_its_fingerprint():
    """A change to a time rule (queuectl.store.timing) must come with a PostgreSQL migration step that replaces
    claim_limited (run claim_limited() again), then a new fingerprint here; test_postgres.py checks that a migrated
    database holds the current rendering."""
    text = claim_limited()
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == CLAIM_LIMITED_FINGERPRINT, (
        "a time rule changed: add a PostgreSQL migration step that runs claim_limited(), then update the fingerprint")


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
