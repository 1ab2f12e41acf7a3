"""Activity history as real workers make it, on SQLite and PostgreSQL: a drain of jobs with known outcomes (some
complete, some fail and are retried, some die, some are cancelled, one is recovered from a killed worker) counts
each exactly, and the run time percentiles of jobs with a known sleep fall in the bucket of the truth."""

from __future__ import annotations

import json
import os
import signal

from support.cli import configure, enqueue, queuectl
from support.waiting import wait_for
from queuectl.api.history import history, quantile
from queuectl.domain.models import JobState
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


FAST = (("heartbeat-interval", "0.2"), ("poll-interval", "0.05"), ("stale-after", "60"), ("backoff-base", "1"),
        ("backoff-max", "0"))
ENDED = (JobState.COMPLETED, JobState.DEAD, JobState.CANCELLED)


def test_a_drain_with_every_outcome_is_counted_exactly(db, run_cli, store, workers):
    configure(run_cli, *FAST)
    # the recovered one: its first attempt runs until its worker is killed, its second completes
    enqueue(run_cli, id="victim", queue="lost", command='[ "$QUEUECTL_ATTEMPT" = 1 ] && sleep 60; true')
    a = workers.start("--queue", "lost", "--name", "a")
    wait_for(lambda: store.get_job("victim").pgid is not None and store.get_job("victim").started_at is not None,
             message=f"the victim's start to be recorded: {workers.output(a)}")
    os.kill(a.pid, signal.SIGKILL)
    a.wait()
    for i in range(4):
        enqueue(run_cli, id=f"sleep{i}", queue="sleepy", command="sleep 0.3")
    for i in range(2):  # fail once, then complete
        enqueue(run_cli, id=f"flaky{i}", command='[ "$QUEUECTL_ATTEMPT" -gt 1 ]', max_retries=2)
    enqueue(run_cli, id="dead0", command="exit 3", max_retries=0)
    enqueue(run_cli, id="dead1", command="exit 3", max_retries=1)  # a retry, then dead
    enqueue(run_cli, id="stopme", command="sleep 60")
    enqueue(run_cli, id="held", queue="held", command="true")
    assert run_cli("pause", "held").exit_code == 0
    assert run_cli("cancel", "held").exit_code == 0  # pending: cancelled at once
    b = workers.start("--count", "4", "--name", "b")
    wait_for(lambda: store.get_job("stopme").started_at is not None,
             message=f"stopme to start: {workers.output(b)}")
    assert run_cli("cancel", "stopme").exit_code == 0  # running: its worker stops it
    ids = ["victim", "stopme", *(f"sleep{i}" for i in range(4)), "flaky0", "flaky1", "dead0", "dead1"]
    wait_for(lambda: all(store.get_job(j).state in ENDED for j in ids), timeout=60,
             message=f"every job to end: {workers.output(b)}")
    b.send_signal(signal.SIGTERM)
    assert b.wait(30) == 0
    assert {j: store.get_job(j).state.value for j in ("victim", "stopme", "flaky0", "dead1")} == {
        "victim": "completed", "stopme": "cancelled", "flaky0": "completed", "dead1": "dead"}

    rows = history(store, since=3600, by_queue=False)
    summed = [sum(getattr(r, name) for r in rows)
              for name in ("started", "completed", "failed", "dead", "cancelled", "recovered")]
    # started: 4 sleeps, 2 x 2 flaky, 1 + 2 dead, stopme, the victim's two attempts
    assert summed == [14, 7, 3, 2, 2, 1]
    totals = store.activity_totals()
    sleepy = totals["sleepy"]
    assert (sleepy.completed, sum(sleepy.run)) == (4, 4)
    for q in (0.5, 0.95):  # in the bucket of 0.3 s and a little
        assert 0.25 <= quantile(q, sleepy.run) <= 0.5, sleepy.run
    assert sum(sum(t.run) for t in totals.values()) == 7 + 3 + 2 + 1  # every end of a started run but the lost one
    assert sum(sum(t.wait) for t in totals.values()) == 14
    # the command line reads the same, as a process of its own
    out = json.loads(queuectl(db, "history", "--since", "1h", "--step", "1h", "--json").stdout)
    assert sum(r["completed"] for r in out) == 7 and sum(r["recovered"] for r in out) == 1
