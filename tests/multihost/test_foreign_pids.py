"""A job running on one host is never killed from another, even where a process group there has the job's pgid.

The job runs on the owner host and the store records its process group (pgid). On the
other host a namesake group of that very id is made (ns_last_pid written just before the
fork), in two kinds: a `setsid sleep` whose pid, process group and session are the pgid
(its leader's start time differs from the recorded one, which would save it anyway), and
a group whose leader has exited while its `sleep` lives on, which nothing but the host
check tells from the recorded group (procs.group_alive counts any live member then).
Then the owner's worker alone is frozen with SIGSTOP (`systemctl kill --kill-whom=main`):
its job runs on, as it would behind a hung worker, and stays a live group of that pgid on
its own host. (Freezing the whole unit's cgroup would stop the job too, leaving a frozen
process: a weaker test of the rule, and not what a hung worker looks like.) The other
host's worker finds the frozen one stale after stale-after and recovers the job: it must
kill nothing on its own host, where that pgid names another group, and the job on the
owner lives on. Run both ways: the job on B and the namesake on A, and the other way round.
"""

from __future__ import annotations

import time

import pytest

from support.cli import shown
from support.waiting import wait_for

from .cluster import FAST_LIVENESS, configure, enqueue, sql, status


STALE_AFTER = float(FAST_LIVENESS["stale-after"])


def recorded_pgid(db: str, job_id: str) -> int | None:
    """The process group the store recorded for the job's current run (None until it is recorded)."""
    rows = sql(db, "SELECT pgid FROM jobs WHERE id = %s AND state = 'processing'", (job_id,))
    return rows[0][0] if rows and rows[0][0] else None


@pytest.mark.parametrize("leader", [True, False], ids=["namesake-leader", "namesake-leaderless"])
@pytest.mark.parametrize("owner_index", [1, 0], ids=["job-on-B", "job-on-A"])
def test_a_recovery_never_kills_a_group_on_its_own_host_that_has_the_jobs_pgid(hosts, db, figures,
                                                                               owner_index, leader):
    owner, other = hosts[owner_index], hosts[1 - owner_index]
    configure(db, FAST_LIVENESS)
    unit = owner.start_worker(db, f"{owner.name}-w1", count=1)
    enqueue(db, [{"id": "held", "command": "sleep 300"}])
    pgid = wait_for(lambda: recorded_pgid(db, "held"), timeout=30, interval=0.2,
                    message="the job's process group to be recorded")
    job_process = owner.process(pgid)
    assert job_process is not None and job_process[0] == pgid, job_process  # the job's group leader, on the owner

    namesake = other.spawn_group(pgid, leader=leader)
    namesake_process = other.process(namesake)
    assert namesake_process[0] == pgid and namesake_process[2] == "S", namesake_process
    assert (other.process(pgid) is not None) == leader  # leaderless: no process of that pid
    other.start_worker(db, f"{other.name}-w1", count=1)
    time.sleep(2)  # the other worker has watched the owner's beat

    owner.signal(unit, "SIGSTOP")  # the worker only: its job runs on
    frozen = time.monotonic()
    wait_for(lambda: shown(db, "held")["attempts"] == 2, timeout=3 * STALE_AFTER, interval=0.2,
             message="the other host to recover the job and run it again")
    recovered = time.monotonic() - frozen
    time.sleep(1)  # a wrong kill would have landed by now (recovery kills before it gives the job back)
    holder = next((w["host"] for w in status(db)["workers"] if "held" in w["jobs"]), None)
    journal = other.journals()

    figures.add("job's pgid on the owner; namesake group, its sleep's pid", f"{pgid}; {pgid}, {namesake}")
    figures.add("owner's worker frozen to the job recovered", f"{recovered:.1f} s")
    figures.add("now running it", holder)
    figures.add("namesake (pgid, start, state) before, after", f"{namesake_process}, {other.process(namesake)}")
    figures.add("owner's job process (pgid, start, state) before, after", f"{job_process}, {owner.process(pgid)}")

    assert holder == other.name
    assert other.process(namesake) == namesake_process  # the same process, still asleep
    assert owner.process(pgid) is not None and owner.process(pgid)[:2] == job_process[:2]  # and the job on its host
    assert f"recovered job held from stale worker '{owner.name}-w1'" in journal, journal
    assert "killed the leftover process group" not in journal, journal
