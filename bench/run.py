#!/usr/bin/env python3
"""queuectl benchmark: every figure is a ratio to a baseline measured in the same run.

    python bench/run.py [--smoke] [--json FILE]

1. spawn ceiling: subprocess.run(["/bin/sh", "-c", "true"]) per second, one and two at a time;
2. drain: `queuectl worker start --count C --burst` on N `true` jobs, first start to last completion;
3. pickup latency: enqueue commit to job start with an idle worker, and the idle worker's CPU;
4. enqueue: one `queuectl enqueue` against `python -c "import click, sqlite3, json"`, and
   `enqueue --file` against a bare executemany insert of the same rows;
5. scale: the drain of (2) and `status` / `list` with a million completed jobs stored;
6. retention: 200,000 jobs that each print 10 KB drained with keep-completed 60s, against the
   same drain with retention off: the largest database-plus-WAL size on disk, and the drain rate.

Each figure is the median of several rounds. --smoke shrinks every size so the suite can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from queuectl.jobspec import NewJob  # noqa: E402
from queuectl.cli.common import wake_workers  # noqa: E402
from queuectl.store import SqliteStore  # noqa: E402

PY = sys.executable
QUEUECTL = [PY, "-m", "queuectl"]
ENV = {**os.environ, "QUEUECTL_CONFIG": "", "PYTHONPATH": str(REPO)}
SIZES = {
    "full": dict(rounds=3, spawn=2000, drain=2000, pickup=100, idle=10.0, cli=15, file=100_000, stored=1_000_000,
                 retention=200_000, keep=60),
    "smoke": dict(rounds=1, spawn=50, drain=50, pickup=5, idle=0.5, cli=2, file=500, stored=2_000,
                  retention=300, keep=1),
}


def median_of(rounds: int, measure) -> float:
    return statistics.median(measure() for _ in range(rounds))


# -- 1. the spawn ceiling ------------------------------------------------------------------------


def spawn_rate(n: int, concurrency: int) -> float:
    """Bare /bin/sh -c true runs per second, `concurrency` at a time."""
    def run(count):
        for _ in range(count):
            subprocess.run(["/bin/sh", "-c", "true"])

    threads = [threading.Thread(target=run, args=(n // concurrency,)) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (n // concurrency * concurrency) / (time.perf_counter() - start)


# -- 2. drain --------------------------------------------------------------------------------------


def fill(db: str, n: int, command: str = "true", state: str = "pending", prefix: str = "j") -> None:
    """Insert n jobs through the store (one transaction); `state` other than pending is set directly."""
    now = time.time()
    with SqliteStore(db) as store:
        store.enqueue([NewJob(f"{prefix}{i}", command, "default", 0, None, now, None, None) for i in range(n)], now)
        if state != "pending":
            store.conn.execute("UPDATE jobs SET state = ?, finished_at = ? WHERE id LIKE ?",
                               (state, now, f"{prefix}%"))


def quiet_settings(db: str) -> None:
    with SqliteStore(db) as store:
        store.set_setting("poll-interval", "0.05")


def drain_rate(db: str, n: int, count: int) -> float:
    """Jobs per second from the first start to the last completion of n `true` jobs (then deleted)."""
    prefix = f"d{time.monotonic_ns()}-"
    fill(db, n, prefix=prefix)
    subprocess.run([*QUEUECTL, "--db", db, "worker", "start", "--count", str(count), "--burst"],
                   env=ENV, check=True, stderr=subprocess.DEVNULL)
    with sqlite3.connect(db) as conn:
        first, last, done = conn.execute(
            "SELECT min(started_at), max(finished_at), count(*) FROM jobs WHERE id LIKE ? AND state = 'completed'",
            (prefix + "%",)).fetchone()
        conn.execute("DELETE FROM job_output WHERE seq IN (SELECT seq FROM jobs WHERE id LIKE ?)", (prefix + "%",))
        conn.execute("DELETE FROM jobs WHERE id LIKE ?", (prefix + "%",))
    assert done == n, f"drained {done} of {n}"
    return n / (last - first)


# -- 3. pickup latency and idle CPU ----------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_worker(db: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([*QUEUECTL, "--db", db, "worker", "start", *args], env=ENV,
                            stderr=subprocess.DEVNULL)
    with SqliteStore(db) as store:
        deadline = time.monotonic() + 30
        while not any(w.pid == proc.pid for w in store.workers()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the worker did not start")
            time.sleep(0.02)
    return proc


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(30)


def pickup(db: str, n: int, idle: float) -> dict:
    """Enqueue-commit to job-start latencies (ms) with an idle worker, and its CPU share while idle."""
    proc = start_worker(db, "--count", "1")
    try:
        time.sleep(0.5)
        before = cpu_seconds(proc.pid)
        time.sleep(idle)
        idle_cpu = (cpu_seconds(proc.pid) - before) / idle * 100
        latencies = []
        with SqliteStore(db) as store:
            for i in range(n):
                job_id = f"p{time.monotonic_ns()}"
                now = time.time()
                store.enqueue([NewJob(job_id, "true", "default", 0, None, now, None, None)], now)
                committed = time.time()
                wake_workers(store)  # what `queuectl enqueue` does after its commit
                while (job := store.get_job(job_id)).started_at is None:
                    time.sleep(0.0005)
                latencies.append(max(0.0, job.started_at - committed) * 1000)
                time.sleep(0.02)  # let the worker go idle again
    finally:
        stop_worker(proc)
    latencies.sort()
    return {"p50_ms": statistics.median(latencies),
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            "idle_cpu_percent": idle_cpu}


# -- 4. enqueue --------------------------------------------------------------------------------------


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=ENV, check=True, input=stdin, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def enqueue_cli(db: str, runs: int) -> dict:
    counter = iter(range(10**9))
    one = statistics.median(timed([*QUEUECTL, "--db", db, "enqueue", '{"command":"true","id":"c%d"}' % next(counter)])
                            for _ in range(runs))
    base = statistics.median(timed([PY, "-c", "import click, sqlite3, json"]) for _ in range(runs))
    return {"enqueue_s": one, "import_baseline_s": base, "ratio": one / base}


def enqueue_file(tmp: Path, n: int) -> dict:
    lines = [json.dumps({"id": f"f{i}", "command": f"echo {i}"}) for i in range(n)]
    data = ("\n".join(lines) + "\n").encode()
    db = str(tmp / "file.db")
    SqliteStore(db).close()
    cli = timed([*QUEUECTL, "--db", db, "enqueue", "--file", "-"], stdin=data)
    # The baseline: the same rows inserted by one executemany into a fresh queuectl database (same
    # schema, indexes and triggers, synchronous=FULL): what is left is parsing, checking and start-up.
    bare_db = str(tmp / "bare.db")
    SqliteStore(bare_db).close()
    conn = sqlite3.connect(bare_db, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    now = time.time()
    rows = [(f"f{i}", "default", f"echo {i}", now, now, now) for i in range(n)]
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO jobs (id, queue, command, state, run_at, created_at, updated_at)"
                     " VALUES (?, ?, ?, 'pending', ?, ?, ?)", rows)
    conn.execute("COMMIT")
    bare = time.perf_counter() - start
    conn.close()
    return {"cli_rows_per_s": n / cli, "bare_rows_per_s": n / bare, "ratio": bare / cli}


# -- 5. scale ----------------------------------------------------------------------------------------


def cli_time(db: str, runs: int, *args: str) -> float:
    return statistics.median(timed([*QUEUECTL, "--db", db, *args]) for _ in range(runs))


# -- 6. retention -----------------------------------------------------------------------------------


def disk_bytes(db: str) -> int:
    """The database and its WAL on disk, in bytes."""
    return sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))


def retention_run(db: str, n: int, keep: str) -> dict:
    """Drain n jobs that print 10 KB each with keep-completed `keep`; sample the size on disk meanwhile."""
    SqliteStore(db).close()
    quiet_settings(db)
    with SqliteStore(db) as store:
        store.set_setting("keep-completed", keep)
    fill(db, n, command="head -c 10240 /dev/zero")
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample():
        while not done.wait(0.5):
            samples.append((time.monotonic(), disk_bytes(db)))

    sampler = threading.Thread(target=sample)
    samples.append((time.monotonic(), disk_bytes(db)))
    sampler.start()
    started = time.monotonic()
    try:
        subprocess.run([*QUEUECTL, "--db", db, "worker", "start", "--count", "2", "--burst"],
                       env=ENV, check=True, stderr=subprocess.DEVNULL)
    finally:
        done.set()
        sampler.join()
    samples.append((time.monotonic(), disk_bytes(db)))
    elapsed = time.monotonic() - started
    with SqliteStore(db) as store:
        ran = sum(store.run_counts().get("default", {}).values())
    assert ran == n, f"ran {ran} of {n}"
    return {"jobs_per_s": n / elapsed, "max_bytes": max(b for _, b in samples), "final_bytes": disk_bytes(db),
            "seconds": elapsed}


def retention(tmp: Path, n: int, keep: int) -> dict:
    """Retention on (keep-completed `keep` s) against off, in one run; sizes in bytes."""
    on = retention_run(str(tmp / "keep.db"), n, f"{keep}s")
    off = retention_run(str(tmp / "forever.db"), n, "forever")
    per_job = off["final_bytes"] / n
    # What retention must keep: the jobs that finished within the last `keep` seconds.
    live = min(n, on["jobs_per_s"] * keep) * per_job
    return {"jobs": n, "keep_s": keep, "max_bytes_on": on["max_bytes"], "max_bytes_off": off["max_bytes"],
            "live_bytes": live, "max_over_live": on["max_bytes"] / live,
            "drain_on_per_s": on["jobs_per_s"], "drain_off_per_s": off["jobs_per_s"],
            "drain_ratio": on["jobs_per_s"] / off["jobs_per_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check the benchmark runs")
    parser.add_argument("--json", default=str(REPO / "bench" / "results.json"), help="write results here")
    args = parser.parse_args()
    size = SIZES["smoke" if args.smoke else "full"]
    # Time the code as installed: with bytecode compiled (pip and the .deb compile it; a run with
    # PYTHONDONTWRITEBYTECODE set would otherwise recompile every module on every start).
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "queuectl")], check=True)
    r, out = size["rounds"], {"machine": machine(), "sizes": size}
    with tempfile.TemporaryDirectory(prefix="queuectl-bench-") as tmpdir:
        tmp = Path(tmpdir)
        ceiling = {c: median_of(r, lambda: spawn_rate(size["spawn"], c)) for c in (1, 2)}
        out["spawn_per_s"] = ceiling
        empty = str(tmp / "empty.db")
        SqliteStore(empty).close()
        quiet_settings(empty)
        drains = {c: median_of(r, lambda: drain_rate(empty, size["drain"], c)) for c in (1, 2)}
        out["drain_per_s"] = drains
        out["drain_ratio"] = {c: drains[c] / ceiling[c] for c in (1, 2)}
        out["pickup"] = pickup(str(tmp / "pickup.db"), size["pickup"], size["idle"])
        out["enqueue"] = enqueue_cli(str(tmp / "cli.db"), size["cli"])
        out["enqueue_file"] = enqueue_file(tmp, size["file"])
        status_empty = cli_time(empty, size["cli"], "status")
        list_empty = cli_time(empty, size["cli"], "list", "--state", "pending", "--limit", "100")
        big = str(tmp / "big.db")
        SqliteStore(big).close()
        quiet_settings(big)
        fill(big, size["stored"], state="completed", prefix="old")
        fill(big, 100, command="true", prefix="later", state="pending")  # pending rows for `list`
        big_list = cli_time(big, size["cli"], "list", "--state", "pending", "--limit", "100")
        with sqlite3.connect(big) as conn:
            conn.execute("UPDATE jobs SET state = 'completed' WHERE id LIKE 'later%'")
        big_drain = median_of(r, lambda: drain_rate(big, size["drain"], 2))
        out["scale"] = {
            "stored_completed": size["stored"],
            "drain_ratio": drains[2] / big_drain,
            "status_ratio": cli_time(big, size["cli"], "status") / status_empty,
            "list_ratio": big_list / list_empty,
        }
        out["retention"] = retention(tmp, size["retention"], size["keep"])
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    report(out)


def machine() -> dict:
    import platform

    return {"cpus": os.cpu_count(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "kernel": platform.release(), "date": time.strftime("%Y-%m-%d")}


def report(out: dict) -> None:
    c, d, p, e, f, s, k = (out[k] for k in ("spawn_per_s", "drain_per_s", "pickup", "enqueue", "enqueue_file",
                                            "scale", "retention"))
    rows = [
        ("spawn ceiling, 1 / 2 at a time", f"{c[1]:.0f} / {c[2]:.0f} per s", ""),
        ("drain --count 1", f"{d[1]:.0f} jobs/s", f"{out['drain_ratio'][1]:.2f} of ceiling (target >= 0.80)"),
        ("drain --count 2", f"{d[2]:.0f} jobs/s", f"{out['drain_ratio'][2]:.2f} of ceiling (target >= 0.85)"),
        ("pickup latency p50 / p99", f"{p['p50_ms']:.1f} / {p['p99_ms']:.1f} ms", "target <= 5 / 25 ms"),
        ("idle worker CPU", f"{p['idle_cpu_percent']:.2f} % of a core", "target <= 0.5 %"),
        ("one enqueue vs import baseline", f"{e['enqueue_s'] * 1000:.0f} vs {e['import_baseline_s'] * 1000:.0f} ms",
         f"{e['ratio']:.2f}x (target <= 1.15x)"),
        ("enqueue --file vs bare insert", f"{f['cli_rows_per_s']:.0f} vs {f['bare_rows_per_s']:.0f} rows/s",
         f"{f['ratio']:.2f}x (target >= 0.5x)"),
        (f"drain with {s['stored_completed']:,} stored", "", f"{s['drain_ratio']:.2f}x empty (target <= 1.05x)"),
        ("status / list --limit 100, stored", "", f"{s['status_ratio']:.2f}x / {s['list_ratio']:.2f}x empty"
         " (target <= 1.2x)"),
        (f"{k['jobs']:,} jobs of 10 KB, keep-completed {k['keep_s']}s", f"largest {k['max_bytes_on'] / 2**20:.0f} MiB",
         f"{k['max_over_live']:.2f}x the live jobs' {k['live_bytes'] / 2**20:.0f} MiB; without retention"
         f" {k['max_bytes_off'] / 2**20:.0f} MiB"),
        ("drain with retention vs without", f"{k['drain_on_per_s']:.0f} vs {k['drain_off_per_s']:.0f} jobs/s",
         f"{k['drain_ratio']:.2f}x (target >= 0.9x)"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value, ratio in rows:
        print(f"{name:<{width}}  {value:<26} {ratio}")


if __name__ == "__main__":
    main()
