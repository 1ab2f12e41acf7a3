"""The script workflows across hosts: on host A, `wait` and `logs --follow` of a job that a worker on
host B runs, through the shared PostgreSQL server alone (the hosts share no file with the job)."""

from __future__ import annotations

import json
import threading



#: Five lines 0.3 s apart, then exit 3 (no retries): the job ends dead.
JOB = {"id": "remote", "command": "for i in 1 2 3 4 5; do echo line $i; echo err $i >&2; sleep 0.3; done; exit 3",
       "max_retries": 0}


def test_wait_and_follow_on_host_a_for_a_job_run_on_host_b(hosts, db):
    a, b = hosts
    a.queuectl(db, "enqueue", json.dumps(JOB))
    a.queuectl(db, "enqueue", json.dumps({"id": "after", "command": "echo next", "after": "remote"}))
    results = {}

    def on_a(name: str, *args: str) -> None:
        results[name] = a.queuectl(db, *args, check=False, timeout=120)

    waiters = [threading.Thread(target=on_a, args=("wait", "wait", "remote", "--timeout", "90")),
               threading.Thread(target=on_a, args=("follow", "logs", "--follow", "remote")),
               threading.Thread(target=on_a, args=("after", "wait", "after", "--timeout", "90"))]
    for t in waiters:
        t.start()
    b.start_worker(db, "b1", count=1)
    for t in waiters:
        t.join(150)
    wait, follow, after = results["wait"], results["follow"], results["after"]
    # The attempt's end as the wait saw it (unless the job had ended before the wait's first read: an end
    # before the wait is history), then its verdict (docs/cli.md, Saying each attempt).
    assert wait.returncode == 1, wait
    assert wait.stderr in ("job remote: attempt 1 of 1 failed (exit code 3): dead\njob remote dead: exit code 3\n",
                           "job remote dead: exit code 3\n"), wait
    assert follow.returncode == 1, follow
    assert follow.stdout == "".join(f"line {i}\n" for i in range(1, 6)), follow
    assert follow.stderr == "".join(f"err {i}\n" for i in range(1, 6)) + "job remote dead: exit code 3\n", follow
    assert (after.returncode, after.stderr) == (1, "job after cancelled: dependency remote is dead\n"), after
