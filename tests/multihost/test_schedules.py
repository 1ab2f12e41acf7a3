"""Schedules and limits across hosts that share only the PostgreSQL server: a schedule fires once per
slot with a worker on each host (one of them with its wall clock an hour ahead: slots are due on the
server's clock), and a concurrency limit of 1 holds across both hosts."""

from __future__ import annotations

import json
from collections import Counter


from support.cli import queuectl
from support.jobs import slot_of
from support.waiting import wait_for

from .cluster import configure, enqueue, faketime_env, sql, status, wait_completed



def test_a_schedule_fires_once_per_slot_with_workers_on_both_hosts(hosts, db, runs, figures):
    a, b = hosts
    configure(db, {"poll-interval": "0.2"})
    a.start_worker(db, "a1", count=2)
    b.start_worker(db, "b1", count=2, env=faketime_env("+1h"))  # its wall clock an hour ahead
    queuectl(db, "schedule", "add", "tick", "--every", "2s", "--overlap", "allow",
             json.dumps({"command": runs.command(0)}))
    wait_for(lambda: len(runs.all()) >= 6, timeout=60, interval=0.5, message="6 runs")
    queuectl(db, "schedule", "pause", "tick")
    fired = {}

    def settled() -> bool:  # every run fired (logged in a journal) has completed, and is in the runs' log
        fired.update({h.name: h.journals().count("schedule tick: slot") for h in hosts})
        return sum(fired.values()) == status(db)["jobs"]["completed"] == len(runs.all())

    wait_for(settled, timeout=30, interval=0.5, message="the runs fired to complete")
    done = runs.all()
    per_job = Counter(r.job for r in done)
    slots = sorted(slot_of(job) for job in per_job)
    figures.add("runs", len(done))
    figures.add("slots fired by host", fired)
    assert set(per_job.values()) == {1} and runs.overlaps() == [], per_job  # no slot ran twice
    assert [y - x for x, y in zip(slots, slots[1:])] == [2.0] * (len(slots) - 1), slots  # none was skipped
    assert sum(fired.values()) == len(per_job), (fired, a.journals(), b.journals())  # each fired by one host
    server_now = float(sql(db, "SELECT extract(epoch FROM clock_timestamp())")[0][0])
    assert abs(slots[-1] - server_now) < 30  # slots on the server's clock, not host B's hour ahead


def test_a_concurrency_limit_of_1_holds_across_hosts(hosts, db, runs, figures):
    configure(db, {"poll-interval": "0.2"})
    queuectl(db, "limit", "build", "--concurrency", "1")
    enqueue(db, [{"id": f"b{i}", "queue": "build", "command": runs.command(0.4)} for i in range(8)]
            + [{"id": f"o{i}", "queue": "other", "command": runs.command(0.4)} for i in range(8)])
    units = {h.name: h.start_worker(db, f"{h.name}-w1", count=2) for h in hosts}
    # The worker whose job ends takes the freed place at once, in the same transaction: stop the host that
    # runs the build jobs once it has run 3, so that the other host takes over while its last one runs.
    wait_for(lambda: sum(r.job.startswith("b") for r in runs.all()) >= 3, timeout=60, interval=0.2,
             message="3 build runs")
    first = max((r for r in runs.all() if r.job.startswith("b")), key=lambda r: r.end).host
    host = next(h for h in hosts if h.name == first)
    host.run("systemctl", "stop", units[first], timeout=60)  # it drains: its running jobs finish first
    wait_completed(db, 16, timeout=120)
    build = sorted((r for r in runs.all() if r.job.startswith("b")), key=lambda r: r.start)
    other = [r for r in runs.all() if r.job.startswith("o")]
    per_host = Counter(r.host for r in build)
    figures.add("build runs by host", dict(per_host))
    assert len(build) == 8 and len(other) == 8
    assert len(per_host) == 2, per_host  # both hosts ran build jobs ...
    overlapping = [(x.job, y.job) for x, y in zip(build, build[1:]) if y.start < x.end]
    assert overlapping == [], [(r.job, r.host, r.start, r.end) for r in build]  # ... never two at once
