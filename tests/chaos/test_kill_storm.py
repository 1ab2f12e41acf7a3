"""Kill storm: 10,000 jobs through 4 workers of 2 slots while a worker is SIGKILLed every 300 ms.

Each killed worker is restarted at once, every other one under its old name (its new
incarnation recovers its jobs at registration) and the rest under a new name (a peer
finds the dead process at its next heartbeat). Every run of a job appends
(id, attempt, start, end) to one log and holds an flock on a file of its own while it
runs, so a second copy of a job that started while the first still ran would log an
overlap even if the first never got to log its end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
from collections import defaultdict

import pytest

from conftest import configure, require, wait_for
from queuectl.models import JobState

from .conftest import integrity

pytestmark = pytest.mark.chaos

JOBS = 10_000
WORKERS = 4
KILL_EVERY = 0.3  # seconds
DEADLINE = 400  # seconds for the whole storm; it takes about a minute here


def _job_command(locks: str, log: str) -> str:
    run = (f'echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT start $(date +%s%N)" >> {log}; sleep 0.01; '
           f'echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT end $(date +%s%N)" >> {log}')
    return (f"flock -n -E 97 {locks}/$QUEUECTL_JOB_ID sh -c '{run}' "
            f'|| {{ [ $? -ne 97 ] || echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT overlap 0" >> {log}; exit 1; }}')


def test_kill_storm(db, run_cli, store, workers, tmp_path, figures):
    require(None if shutil.which("flock") else "flock is missing (apt-get install util-linux)", "chaos")
    # Deaths on this host are found by pid at once, so stale-after never decides here.
    configure(run_cli, ("heartbeat-interval", "0.2"), ("stale-after", "5"), ("poll-interval", "0.05"),
              ("max-retries", "1000"), ("backoff-max", "0"))
    locks = tmp_path / "locks"
    locks.mkdir()
    log = tmp_path / "runs.log"
    command = _job_command(str(locks), str(log))
    lines = "\n".join(json.dumps({"id": f"k{i:05d}", "command": command}) for i in range(JOBS))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0

    rng = random.Random(20261201)
    started = time.monotonic()
    live = {f"w{n}": workers.start("--name", f"w{n}", "--count", "2") for n in range(WORKERS)}
    kills = hits = held_total = 0
    serial = WORKERS
    while True:
        time.sleep(KILL_EVERY)
        if store.counts().get("default", {}).get("completed", 0) == JOBS:
            break
        assert time.monotonic() - started < DEADLINE, f"not done after {DEADLINE} s: {store.counts()}"
        name = rng.choice(sorted(live))
        proc = live.pop(name)
        os.kill(proc.pid, signal.SIGSTOP)  # frozen, so what it holds cannot change while we look
        info = store.worker_by_name(name)
        held = len(store.worker_jobs(info.id)) if info is not None and info.pid == proc.pid else 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        hits += held > 0
        held_total += held
        if kills % 2 == 0:
            name = f"w{serial}"
            serial += 1
        live[name] = workers.start("--name", name, "--count", "2")
    elapsed = time.monotonic() - started
    for proc in live.values():
        proc.send_signal(signal.SIGTERM)
    for proc in live.values():
        assert proc.wait(60) == 0, workers.output(proc)
    wait_for(lambda: store.workers() == [], timeout=10, message="every worker to deregister")

    runs: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    overlaps = []
    for line in log.read_text().splitlines():
        job_id, attempt, kind, ns = line.split()
        if kind == "overlap":
            overlaps.append(job_id)
        runs[job_id][int(attempt)][kind] = int(ns)
    starts = sum(1 for per in runs.values() for r in per.values() if "start" in r)
    unfinished = sum(1 for per in runs.values() for r in per.values() if "end" not in r)
    overlapping = []
    for job_id, per in runs.items():
        ordered = sorted(per.values(), key=lambda r: r["start"])
        overlapping += [job_id for a, b in zip(ordered, ordered[1:]) if "end" in a and a["end"] > b["start"]]
    reruns = starts - JOBS
    states = store.counts()["default"]
    attempts = store.conn.execute("SELECT sum(attempts), max(attempts) FROM jobs").fetchone()

    figures.add("jobs", JOBS)
    figures.add("time to drain", f"{elapsed:.1f} s ({JOBS / elapsed:.0f} jobs/s)")
    figures.add("worker processes started", WORKERS + kills)
    figures.add("SIGKILLs", kills)
    figures.add("kills that hit running jobs", f"{hits} (holding {held_total} jobs)")
    figures.add("runs started", f"{starts} ({reruns} reruns, {unfinished} cut short)")
    figures.add("claims (attempts) in all / most for one job", f"{attempts[0]} / {attempts[1]}")
    figures.add("overlapping runs", len(overlaps) + len(overlapping))

    assert states == {JobState.COMPLETED.value: JOBS}, states  # every job completed, none stuck
    assert sorted(runs) == [f"k{i:05d}" for i in range(JOBS)]
    assert all(any("end" in r for r in per.values()) for per in runs.values())
    assert overlaps == [] and overlapping == [], (overlaps[:5], overlapping[:5])
    assert kills >= 50, kills  # the storm really stormed
    assert reruns <= held_total, (reruns, held_total)
    assert integrity(db) == "ok"
