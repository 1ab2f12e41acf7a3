"""A whole host dies mid-job (its container SIGKILLed at once): the other host recovers the job after stale-after."""

from __future__ import annotations

import time


from support.cli import shown
from support.waiting import wait_for

from .cluster import FAST_LIVENESS, configure, enqueue, status


STALE_AFTER = float(FAST_LIVENESS["stale-after"])
HEARTBEAT = float(FAST_LIVENESS["heartbeat-interval"])
JOB_SECONDS = 4


def running_on(db: str, job_id: str) -> str | None:
    """The host whose worker holds `job_id` now, if any."""
    return next((w["host"] for w in status(db)["workers"] if job_id in w["jobs"]), None)


def test_a_dead_hosts_job_is_recovered_by_the_other_host_after_stale_after(hosts, db, runs, figures):
    a, b = hosts
    configure(db, FAST_LIVENESS)
    b.start_worker(db, "host-b-w1", count=2)
    enqueue(db, [{"id": "victim", "command": runs.command(JOB_SECONDS)}])
    wait_for(lambda: running_on(db, "victim") == "host-b", timeout=30, interval=0.2, message="the job to run on B")
    a.start_worker(db, "host-a-w1", count=2)
    time.sleep(2 * HEARTBEAT)  # A has watched B's worker beat

    b.container.kill()  # B's worker, its job and everything else on B die in the same instant
    killed = time.monotonic()
    wait_for(lambda: shown(db, "victim")["attempts"] == 2, timeout=3 * STALE_AFTER, interval=0.2,
             message="the job to be recovered and run again")
    recovered = time.monotonic() - killed
    wait_for(lambda: shown(db, "victim")["state"] == "completed", timeout=JOB_SECONDS + 30, interval=0.2,
             message="the recovered job to complete")
    completed = time.monotonic() - killed
    final = shown(db, "victim")
    journal = a.journals()
    left = status(db)

    figures.add("stale-after, heartbeat-interval", f"{STALE_AFTER:g} s, {HEARTBEAT:g} s")
    figures.add("host B killed to the job's second attempt", f"{recovered:.1f} s")
    figures.add("host B killed to the job completed", f"{completed:.1f} s")
    figures.add("runs logged", [(r.host, r.attempt) for r in runs.all()])
    figures.add("workers left", [(w["name"], w["state"]) for w in left["workers"]])

    assert (final["state"], final["attempts"], final["exit_code"]) == ("completed", 2, 0), final
    # Not before B fell silent for stale-after (its last beat came up to one interval before the kill).
    assert STALE_AFTER - HEARTBEAT - 0.5 <= recovered <= STALE_AFTER + 4 * HEARTBEAT + 3, recovered
    assert [(r.job, r.host, r.attempt) for r in runs.all()] == [("victim", "host-a", 2)]  # B's run died unlogged
    assert "recovered job victim from stale worker 'host-b-w1'" in journal, journal
    assert [w["name"] for w in left["workers"]] == ["host-a-w1"], left["workers"]
