"""Dependencies between jobs with real worker processes, on SQLite and PostgreSQL: a chain and a
fan-in run in order, dependants enqueued while their dependencies complete are all released, and
the completion that releases a dependant wakes the workers. The rules alone: tests/unit/test_deps.py."""

from __future__ import annotations

import json
import threading

from support.waiting import wait_for
from queuectl.domain.models import JobState
from queuectl.store import open_store
from support.worker_steps import new_job
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_workers_run_a_chain_and_a_fan_in_in_order(db, run_cli, workers):
    steps = {"a": [], "b": [], "c": ["a", "b"], "d": ["c"]}
    for job_id, after in steps.items():
        run_cli("enqueue", json.dumps({"id": job_id, "command": "sleep 0.2", "after": after}))
    worker = workers.start("--burst", "--count", "2")
    with open_store(db) as store:
        try:
            wait_for(lambda: all(j.state == JobState.COMPLETED for j in store.jobs_by_id(steps).values()),
                     timeout=60, message="every job completed")
        except AssertionError as e:
            raise AssertionError(f"{e}: {store.jobs_by_id(steps)}\n{workers.output(worker)}") from None
        jobs = store.jobs_by_id(steps)
    for job_id, after in steps.items():
        for dep in after:
            assert jobs[job_id].started_at >= jobs[dep].finished_at, (job_id, dep)


def test_dependants_enqueued_while_their_dependencies_complete_are_all_released(db, workers):
    """The race of an enqueue with the completion of its dependency: whichever commits first, the
    dependant ends released (never blocked on a completed job)."""
    n = 120
    store = open_store(db)
    store.enqueue([new_job(id=f"a{i}", command="true") for i in range(n)], store.now())
    workers.start("--count", "2")

    def enqueue_dependants(start):
        s = open_store(db)
        for i in range(start, n, 2):
            s.enqueue([new_job(id=f"b{i}", command="true", after=[f"a{i}", f"a{(i + 1) % n}"])], s.now())
        s.close()

    threads = [threading.Thread(target=enqueue_dependants, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ids = [f"b{i}" for i in range(n)]
    try:
        wait_for(lambda: all(j.state == JobState.COMPLETED for j in store.jobs_by_id(ids).values()), timeout=90,
                 message="every dependant completed")
    except AssertionError as e:
        left = [j for j in store.jobs_by_id(ids).values() if j.state != JobState.COMPLETED]
        raise AssertionError(f"{e}: {left[:5]}\n{''.join(workers.output(p) for p in workers.procs)}") from None
    store.close()


def test_a_released_job_is_claimed_at_once_not_at_the_next_poll(db, run_cli, workers):
    """The completion that releases a dependant wakes the workers (as an enqueue does): with a poll-interval
    of 60 s, a chain of three still runs through in seconds."""
    run_cli("config", "set", "poll-interval", "60")
    workers.start("--count", "1")
    for job_id, after in (("p1", []), ("p2", ["p1"]), ("p3", ["p2"])):
        run_cli("enqueue", json.dumps({"id": job_id, "command": "true", "after": after}))
    with open_store(db) as store:
        wait_for(lambda: store.get_job("p3").state == JobState.COMPLETED, timeout=30,
                 message="the chain to run through well within one poll-interval")
