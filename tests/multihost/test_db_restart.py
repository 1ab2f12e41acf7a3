"""The PostgreSQL server restarts while workers on both hosts drain a queue: nothing lost, no run overlaps another.

Twice: `pg_ctl restart -m fast` (every session ended, the server back at once), and a
stop, an outage longer than stale-after, and a start. The test has a server of its own
(the session's is left alone). Every run of a job holds
an flock of its own in the shared directory (JOB_SCRIPT), so a second copy of a job
starting on either host while the first still runs is logged even if the first never
logs its end. A job may run twice (a recovery after the outage) but never two copies at once.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from support.suite import require
from support.waiting import wait_for
from support.pgserver import PgServer

from .cluster import FAST_LIVENESS, TIER, configure, enqueue, overlapping, status, wait_completed


JOBS = 300
JOB_SECONDS = 0.2
OUTAGE = float(FAST_LIVENESS["stale-after"]) + 2  # seconds the server stays down in the second case


@pytest.fixture
def own_server():
    if os.environ.get("QUEUECTL_MULTIHOST_DB") == "sqlite":
        pytest.skip("QUEUECTL_MULTIHOST_DB=sqlite: no server to restart")
    require(PgServer.missing(), TIER)
    with PgServer() as server:  # started; removed at exit (a failed start: at the session's exit)
        yield server


@pytest.mark.parametrize("outage", [0, OUTAGE], ids=["restart", "down-longer-than-stale-after"])
def test_a_database_restart_mid_run_loses_nothing_and_runs_nothing_twice_at_once(hosts, own_server, runs, figures,
                                                                                 outage):
    db = own_server.create_database()
    configure(db, FAST_LIVENESS)
    for h in hosts:
        for n in (1, 2):
            h.start_worker(db, f"{h.name}-w{n}", count=2)
    ids = [f"r{i:03d}" for i in range(JOBS)]
    started = time.monotonic()
    enqueue(db, [{"id": i, "command": runs.command(JOB_SECONDS)} for i in ids])
    wait_for(lambda: status(db)["jobs"]["completed"] >= JOBS // 4, timeout=60, interval=0.2,
             message="a quarter of the jobs to complete")
    before = status(db)["jobs"]["completed"]
    down = time.monotonic()
    if outage:
        own_server.stop("fast")
        time.sleep(outage)
        own_server.start()
    else:
        own_server.restart("fast")  # ends every session; the workers see their connections drop
    downtime = time.monotonic() - down
    final = wait_completed(db, JOBS, timeout=180)
    elapsed = time.monotonic() - started
    done = runs.all()
    per_job = Counter(r.job for r in done)
    journals = [h.journal(u) for h in hosts for u in h.units]
    journal = "".join(journals)

    figures.add("jobs, completed before the restart", f"{JOBS}, {before}")
    figures.add("server down (pg_ctl restart -m fast, or stop ... start)", f"{downtime:.1f} s")
    figures.add("workers that logged the outage and its end", sum("takes writes again" in j for j in journals))
    figures.add("jobs run more than once", sum(1 for n in per_job.values() if n > 1))
    figures.add("recoveries logged", journal.count("recovered job"))
    figures.add("results dropped (job recovered elsewhere)", journal.count("its result is dropped"))
    figures.add("runs by host", dict(Counter(r.host for r in done)))
    figures.add("workers after", [(w["name"], w["state"]) for w in final["workers"]])
    figures.add("enqueue to all completed", f"{elapsed:.1f} s")

    assert final["jobs"] == {**dict.fromkeys(final["jobs"], 0), "completed": JOBS}, final["jobs"]
    assert sorted(per_job) == ids  # nothing lost: every job ran to its end
    assert runs.overlaps() == [] and overlapping(done) == [], (runs.overlaps(), overlapping(done))
    assert sorted(w["state"] for w in final["workers"]) == ["running"] * 4, final["workers"]
    assert any("takes writes again" in j for j in journals), journal  # the outage reached the workers
