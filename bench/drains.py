"""The benchmark's shared parts (bench/run.py and its sections in bench/dashboard.py, bench/breakdown.py,
bench/ab.py): the environment a measured queuectl runs in, filling a queue, draining it with workers, and
a worker's pickup latency and idle CPU (sections 2 and 3 of bench/run.py).

bench/run.py imports every name here (`run.fill`, `run.drain_rate` are how older trees' drains are run by
bench/ab.py).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from queuectl.domain.jobspec import NewJob  # noqa: E402
from queuectl.store import open_store  # noqa: E402
from queuectl.host.wake import wake_local_workers  # noqa: E402

PY = sys.executable
QUEUECTL = [PY, "-m", "queuectl"]
ENV = {**os.environ, "QUEUECTL_CONFIG": "", "PYTHONPATH": str(REPO)}


# -- 2. drain --------------------------------------------------------------------------------------


# A database (`db`) is a SQLite path or a PostgreSQL URI; the store's connection (`store.c`) takes
# `?` placeholders on both.


def fill(db: str, n: int, command: str = "true", state: str = "pending", prefix: str = "j") -> None:
    """Insert n jobs through the store (one transaction); `state` other than pending is set directly."""
    with open_store(db) as store:
        now = store.clock()
        store.enqueue([NewJob(f"{prefix}{i}", command, "default", 0, None, now, None, None) for i in range(n)], now)
        if state != "pending":
            store.c.execute("UPDATE jobs SET state = ?, finished_at = ? WHERE id LIKE ?", (state, now, f"{prefix}%"))


def fill_postgres(uri: str, n: int, command: str = "true", state: str = "pending", prefix: str = "j") -> None:
    """fill()'s rows in one INSERT ... SELECT from generate_series (a million in seconds), then VACUUM ANALYZE.

    The counters stay right: the jobs table's statement-level trigger records the insert's
    deltas in job_count_deltas, as it does for enqueue's.
    """
    with open_store(uri) as store:
        now = store.clock()
        store.c.execute(
            "INSERT INTO jobs (id, queue, command, state, run_at, delay, created_at, updated_at, finished_at)"
            " SELECT ?::text || g, 'default', ?::text, ?::text, ?::float8, 0, ?::float8, ?::float8, ?::float8"
            " FROM generate_series(0, ?::bigint - 1) g",
            (prefix, command, state, now, now, now, None if state == "pending" else now, n))
        store.c.execute("VACUUM ANALYZE jobs")


def quiet_settings(db: str) -> None:
    """Create the queue (if new) with a short poll-interval."""
    with open_store(db) as store:
        store.set_setting("poll-interval", "0.05")


def drain_rate(db: str, n: int, count: int) -> float:
    """Jobs per second from the first start to the last completion of n `true` jobs (then deleted)."""
    prefix = f"d{time.monotonic_ns()}-"
    fill(db, n, prefix=prefix)
    subprocess.run([*QUEUECTL, "--db", db, "worker", "start", "--count", str(count), "--burst"],
                   env=ENV, check=True, stderr=subprocess.DEVNULL)
    with open_store(db) as store:
        first, last, done = store.c.execute(
            "SELECT min(started_at), max(finished_at), count(*) FROM jobs WHERE id LIKE ? AND state = 'completed'",
            (prefix + "%",)).fetchone()
        store.c.execute("DELETE FROM job_output WHERE seq IN (SELECT seq FROM jobs WHERE id LIKE ?)", (prefix + "%",))
        store.c.execute("DELETE FROM jobs WHERE id LIKE ?", (prefix + "%",))
    assert done == n, f"drained {done} of {n}"
    return n / (last - first)


# -- 3. pickup latency and idle CPU ----------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_worker(db: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([*QUEUECTL, "--db", db, "worker", "start", *args], env=ENV,
                            stderr=subprocess.DEVNULL)
    with open_store(db) as store:
        deadline = time.monotonic() + 30
        while not any(w.pid == proc.pid for w in store.workers()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the worker did not start")
            time.sleep(0.02)
    return proc


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(30)


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def pickup(db: str, n: int, idle: float) -> dict:
    """Enqueue-commit to job-start latencies (ms) with an idle worker, and its CPU share while idle.

    `db` is new: its poll-interval stays at the default (1 s), so what is measured is the wake-up
    (SQLite: the datagram the store sends after enqueue's commit; PostgreSQL: the NOTIFY of the commit).
    On PostgreSQL the times are on the server's clock, as the worker's are.
    """
    with open_store(db) as store:
        poll = store.settings()["poll-interval"]
    proc = start_worker(db, "--count", "1")
    try:
        time.sleep(0.5)
        before = cpu_seconds(proc.pid)
        time.sleep(idle)
        idle_cpu = (cpu_seconds(proc.pid) - before) / idle * 100
        latencies = []
        # The wake-up is the caller's hook (the commands hand in the same one): without it, a poll.
        with open_store(db, after_commit=wake_local_workers) as store:
            for i in range(n):
                job_id = f"p{time.monotonic_ns()}"
                now = store.clock()
                store.enqueue([NewJob(job_id, "true", "default", 0, None, now, None, None)], now)
                committed = store.clock()  # the wake-up went out at the commit (a datagram on SQLite, a NOTIFY)
                while (job := store.get_job(job_id)).started_at is None:
                    time.sleep(0.0005)
                latencies.append(max(0.0, job.started_at - committed) * 1000)
                time.sleep(0.02)  # let the worker go idle again
    finally:
        stop_worker(proc)
    latencies.sort()
    return {"p50_ms": statistics.median(latencies), "p95_ms": percentile(latencies, 0.95),
            "p99_ms": percentile(latencies, 0.99), "idle_cpu_percent": idle_cpu, "poll_interval_s": poll}
