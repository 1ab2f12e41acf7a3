"""Kill storm: jobs through 4 workers of 2 slots while a worker is SIGKILLed every 300 ms, on both engines.

10,000 jobs on SQLite; on PostgreSQL, where each worker start costs more (psycopg, two
connections), fewer, so that the storm lasts about as long. Each killed worker is restarted
at once, every other one under its old name (its new incarnation recovers its jobs at
registration) and the rest under a new name (a peer finds the dead process at its next
heartbeat). Every run of a job logs its start and end and holds an flock of its own while it
runs (tests/chaos/load.py), so a second copy of a job that started while the first still ran
would log an overlap even if the first never got to log its end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time

from support.cli import configure
from support.suite import require
from support.waiting import wait_for
from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import JobState
from queuectl.store import is_uri

from .checks import integrity
from .load import RunLog
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


JOBS = {"sqlite": 10_000, "postgresql": 2_500}
MIN_KILLS = 50  # a storm that ends sooner (a fast machine) gets another TOP_UP jobs until it has killed this often
TOP_UP = 500
WORKERS = 4
KILL_EVERY = 0.3  # seconds
DEADLINE = 400  # seconds for the whole storm; it takes about a minute here
#: What SQLite says when a process that runs the WAL's recovery is frozen (the storm's SIGSTOP, before it looks
#: at what the worker holds): every reader waits for the recovery, about 10 s, then gives up with this. The
#: test's own look is one such reader, and a worker started meanwhile fails to open the database. The storm
#: lets the frozen worker go on and starts the failed one again; nothing of the queue's is at stake.
WEDGED = "locking protocol"


def test_kill_storm(db, run_cli, store, workers, tmp_path, figures):
    require(None if shutil.which("flock") else "flock is missing (apt-get install util-linux)", "chaos")
    # Deaths on this host are found by pid at once, so stale-after never decides here.
    configure(run_cli, ("heartbeat-interval", "0.2"), ("stale-after", "5"), ("poll-interval", "0.05"),
              ("max-retries", "1000"), ("backoff-max", "0"))
    jobs = JOBS["postgresql" if is_uri(db) else "sqlite"]
    log = RunLog(tmp_path)
    ids: list[str] = []

    def add_jobs(n: int) -> None:
        new = [f"k{i:05d}" for i in range(len(ids), len(ids) + n)]
        assert run_cli("enqueue", "--file", "-", input="\n".join(json.dumps(j) for j in log.jobs(new))).exit_code == 0
        ids.extend(new)

    add_jobs(jobs)

    rng = random.Random(20261201)
    started = time.monotonic()
    live = {f"w{n}": workers.start("--name", f"w{n}", "--count", "2") for n in range(WORKERS)}
    kills = hits = held_total = wedges = 0
    serial = WORKERS
    while True:
        time.sleep(KILL_EVERY)
        if store.counts().get("default", {}).get("completed", 0) == len(ids):
            if kills >= MIN_KILLS:
                break
            add_jobs(TOP_UP)
        assert time.monotonic() - started < DEADLINE, f"not done after {DEADLINE} s: {store.counts()}"
        for gone, proc in [(n, p) for n, p in live.items() if p.poll() is not None]:  # ended by itself
            assert WEDGED in workers.output(proc), workers.output(proc)  # only what a frozen peer causes
            live[gone] = workers.start("--name", gone, "--count", "2")
            wedges += 1
        name = rng.choice(sorted(live))
        proc = live.pop(name)
        os.kill(proc.pid, signal.SIGSTOP)  # frozen, so what it holds cannot change while we look
        try:
            info = store.worker_by_name(name)
            held = len(store.worker_jobs(info.id)) if info is not None and info.pid == proc.pid else 0
        except DatabaseError as e:  # it froze in the WAL's recovery: go on with it, another is killed next
            assert WEDGED in str(e), e
            os.kill(proc.pid, signal.SIGCONT)
            live[name] = proc
            wedges += 1
            continue
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
    # The last ones started may still be starting up: SIGTERM before their handlers would kill them.
    wait_for(lambda: all(getattr(store.worker_by_name(n), "pid", None) == p.pid for n, p in live.items()),
             timeout=30, message="the last workers started to register")
    for proc in live.values():
        proc.send_signal(signal.SIGTERM)
    for proc in live.values():
        assert proc.wait(60) == 0, workers.output(proc)
    wait_for(lambda: store.workers() == [], timeout=10, message="every worker to deregister")

    runs = log.read()
    reruns = runs.reruns()
    states = store.counts()["default"]
    every = store.list_jobs(limit=len(ids))
    attempts = sum(j.attempts for j in every), max(j.attempts for j in every)
    overlapping = runs.overlapping()

    jobs = len(ids)
    figures.add("jobs", jobs)
    figures.add("time to drain", f"{elapsed:.1f} s ({jobs / elapsed:.0f} jobs/s)")
    figures.add("worker processes started", WORKERS + kills)
    figures.add("SIGKILLs", kills)
    figures.add("kills that hit running jobs", f"{hits} (holding {held_total} jobs)")
    figures.add("runs started", f"{runs.starts} ({reruns} reruns, {runs.unfinished} cut short)")
    figures.add("claims (attempts) in all / most for one job", f"{attempts[0]} / {attempts[1]}")
    figures.add("overlapping runs", len(overlapping))
    figures.add("looks that met a frozen recovery", wedges)

    assert states == {JobState.COMPLETED.value: jobs}, states  # every job completed, none stuck
    assert runs.finished() == ids  # every job ran to its end
    if overlapping:  # the whole story, which an assertion message would cut short
        print(log.story(overlapping[:3], {f"worker {n} (pid {p.pid})": workers.output(p)
                                          for n, p in enumerate(workers.procs)}))
    assert overlapping == [], overlapping[:5]
    assert kills >= MIN_KILLS, kills  # the storm really stormed (checked: the loop tops up until it has)
    assert reruns <= held_total, (reruns, held_total)
    assert integrity(db) == "ok"
