"""Following a job's output while it runs (`logs --follow`, `enqueue --follow`), on SQLite and PostgreSQL: the
follower prints each attempt's output once, in order, and says when another attempt starts; bad usage is one line.
How the store records and reads the output: tests/unit/conformance/test_output.py."""

from __future__ import annotations

import io

from support.cli import assert_error
from queuectl.api.following import follow
from queuectl.domain.models import JobState
from queuectl.store.request import Exchange, Running
from support.worker_steps import NOW, add, bad, claim, finish, ok, record_output, started
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_the_follower_prints_each_attempt_and_says_when_another_starts(store):
    add(store, id="a", max_retries=1)
    w = started(store)
    out, err, notes = io.BytesIO(), io.BytesIO(), []
    steps = iter([
        lambda: record_output(store, w, "a", b"1\n", 0),
        lambda: record_output(store, w, "a", b"2\n", 2, b"oops\n", 0),
        lambda: finish(store, w, [bad("a")], NOW),
        lambda: (claim(store, w, [], 1, NOW + 100), store.exchange(w, Exchange(running=[Running("a", NOW)]), [], NOW)),
        lambda: record_output(store, w, "a", b"again\n", 0),
        lambda: finish(store, w, [ok("a")], NOW + 100),
    ])
    job = follow(store, "a", out, err, notes.append, sleep=lambda s: next(steps)())
    assert job.state == JobState.COMPLETED
    # The ends' records (ok, bad) say they wrote as much as they kept: fewer bytes than the live records
    # had shown, so nothing of theirs is new but ok's 3 bytes of stderr, in attempt 2.
    assert (out.getvalue(), err.getvalue()) == (b"1\n2\nagain\n", b"oops\nerr")
    assert notes == ["attempt 1 ended (exit code 1); following attempt 2"]


def test_logs_follow_of_an_unknown_job_or_with_json_is_refused(db, run_cli):
    assert_error(run_cli("logs", "-f", "ghost"), 1, "no job with id 'ghost'")
    run_cli("enqueue", '{"id": "a", "command": "true"}')
    assert_error(run_cli("logs", "-f", "a", "--json"), 2, "--follow")
    assert_error(run_cli("enqueue", "--follow", "--wait", '{"command": "true"}'), 2, "--follow follows one job")
