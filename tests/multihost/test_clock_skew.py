"""One host's wall clock an hour ahead of the other's (libfaketime in its workers, jobs and commands).

The workers on host A run with the wall clock +1 h (monotonic clocks real); host B's
are right. Jobs that fail twice and then succeed, with backoffs of 2 s and 4 s, and jobs
that run longer than stale-after, on both hosts at once. As without the skew: no worker
declared dead or its jobs recovered, each retry after its backoff (neither early because
the host that scheduled it is ahead nor late because it is behind), `queuectl status` on
both hosts (A's under the same skew) showing every worker running.
"""

from __future__ import annotations

import os
import time


from support.cli import shown
from support.suite import require

from .cluster import FAKETIME_LIB, FAST_LIVENESS, TIER, configure, enqueue, faketime_env, wait_completed


SKEW = 3600
BACKOFF_BASE = 2  # the retry after the n-th failure waits 2**n s
FLAKY = 8  # jobs that fail attempts 1 and 2
LONG = 4  # jobs that run longer than stale-after
LONG_SECONDS = 8
EARLY, LATE = 0.3, 3.0  # tolerance of a retry's start around its backoff, seconds


def test_one_host_an_hour_ahead_changes_nothing(hosts, db, runs, figures):
    require(None if os.path.exists(FAKETIME_LIB) else "libfaketime is missing (apt-get install faketime)", TIER)
    a, b = hosts
    skew = faketime_env(f"+{SKEW}")
    offset = int(a.run("date", "+%s", env=skew).stdout) - int(time.time())
    assert abs(offset - SKEW) <= 2, f"libfaketime does not move A's clock: {offset} s"
    configure(db, {**FAST_LIVENESS, "backoff-base": str(BACKOFF_BASE), "max-retries": "5"})
    workers = [(h, f"{h.name}-w{n}") for h in hosts for n in (1, 2)]
    units = [h.start_worker(db, name, count=2, env=skew if h is a else None) for h, name in workers]
    pid = a.main_pid(units[0])
    assert f"FAKETIME=+{SKEW}" in a.run("cat", f"/proc/{pid}/environ").stdout.split("\0")

    flaky = [f"flaky{i}" for i in range(FLAKY)]
    long = [f"long{i}" for i in range(LONG)]
    enqueue(db, [{"id": i, "command": runs.command(0.5, ok_from=3)} for i in flaky]
            + [{"id": i, "command": runs.command(LONG_SECONDS)} for i in long])
    wait_completed(db, FLAKY + LONG, timeout=90)
    time.sleep(float(FAST_LIVENESS["stale-after"]) + 1)  # idle for longer than stale-after, too
    status_a = a.status(db, env=skew)
    status_b = b.status(db)
    journal = a.journals() + b.journals()
    active = [h.container.show(u, "ActiveState")["ActiveState"] for (h, _), u in zip(workers, units)]

    done = runs.all()
    gaps: list[tuple[str, int, float, str]] = []  # (job, failures before, seconds from failure to retry, hosts)
    for job_id in flaky:
        mine = sorted((r for r in done if r.job == job_id), key=lambda r: r.attempt)
        assert [r.attempt for r in mine] == [1, 2, 3], mine
        for before, after in zip(mine, mine[1:]):
            gaps.append((job_id, before.attempt, after.start - before.end, f"{before.host[-1]}>{after.host[-1]}"))
    long_runs = sorted((r.job, r.attempt) for r in done if r.job.startswith("long"))

    figures.add("skew of host A (libfaketime)", f"+{offset} s")
    for n in (1, 2):
        mine = [g for g in gaps if g[1] == n]
        figures.add(f"retry after failure {n} (due in {BACKOFF_BASE ** n} s): min, max",
                    f"{min(g[2] for g in mine):.2f} s, {max(g[2] for g in mine):.2f} s")
        figures.add(f"retry after failure {n}: scheduled on > run on", sorted(g[3] for g in mine))
    figures.add("runs by host", {h.name: sum(1 for r in done if r.host == h.name) for h in hosts})
    figures.add("status on A (skewed)", [(w["name"], w["state"], w["heartbeat_age"]) for w in status_a["workers"]])
    figures.add("status on B", [(w["name"], w["state"], w["heartbeat_age"]) for w in status_b["workers"]])

    assert "recovered" not in journal and "declared dead" not in journal, journal
    assert active == ["active"] * len(units), active
    assert long_runs == [(i, 1) for i in long]  # each ran once, never recovered mid-run
    assert runs.overlaps() == []
    for job_id in flaky + long:
        j = shown(db, job_id)
        assert (j["state"], j["attempts"]) == ("completed", 3 if job_id in flaky else 1), j
    for job_id, n, gap, where in gaps:
        assert BACKOFF_BASE ** n - EARLY <= gap <= BACKOFF_BASE ** n + LATE, (job_id, n, gap, where)
    names = sorted(name for _, name in workers)
    for seen in (status_a, status_b):
        assert sorted((w["name"], w["state"]) for w in seen["workers"]) == [(n, "running") for n in names], seen
        assert all(w["heartbeat_age"] < float(FAST_LIVENESS["stale-after"]) for w in seen["workers"]), seen
