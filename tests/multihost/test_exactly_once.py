"""1,000 jobs through workers on two hosts: each runs exactly once, and both hosts run some."""

from __future__ import annotations

import json
import time
from collections import Counter


from support.cli import queuectl

from .cluster import configure, enqueue, wait_completed


JOBS = 1000
WORKERS = 2  # per host
SLOTS = 2  # per worker


def test_1000_jobs_run_exactly_once_across_two_hosts(hosts, db, runs, figures):
    configure(db, {"poll-interval": "0.2"})
    for h in hosts:
        for n in range(1, WORKERS + 1):
            h.start_worker(db, f"{h.name}-w{n}", count=SLOTS)
    ids = [f"j{i:04d}" for i in range(JOBS)]
    started = time.monotonic()
    enqueue(db, [{"id": i, "command": runs.command(0)} for i in ids])
    final = wait_completed(db, JOBS, timeout=240)
    elapsed = time.monotonic() - started
    done = runs.all()
    per_host = Counter(r.host for r in done)
    per_job = Counter(r.job for r in done)
    listed = json.loads(queuectl(db, "list", "--json", "--limit", str(2 * JOBS)).stdout)
    attempts = Counter(j["attempts"] for j in listed)
    per_worker = {w["name"]: w["state"] for w in final["workers"]}

    figures.add("jobs", JOBS)
    figures.add("workers x slots per host", f"{WORKERS} x {SLOTS}")
    figures.add("runs by host", dict(sorted(per_host.items())))
    figures.add("jobs run more than once", sum(1 for n in per_job.values() if n > 1))
    figures.add("attempts (count of jobs)", dict(attempts))
    figures.add("enqueue to all completed", f"{elapsed:.1f} s ({JOBS / elapsed:.0f} jobs/s)")

    assert final["jobs"] == {**dict.fromkeys(final["jobs"], 0), "completed": JOBS}, final["jobs"]
    assert sorted(per_job) == ids and set(per_job.values()) == {1}, per_job.most_common(5)
    assert runs.overlaps() == []
    assert attempts == {1: JOBS}
    assert per_host["host-a"] > 0 and per_host["host-b"] > 0, per_host
    assert per_worker == {f"{h.name}-w{n}": "running" for h in hosts for n in range(1, WORKERS + 1)}, per_worker
