#!/usr/bin/env python3
"""queuectl benchmark: every figure is a ratio to a baseline measured in the same run.

    python bench/run.py [--smoke] [--json FILE]

1. spawn ceiling: subprocess.run(["/bin/sh", "-c", "true"]) per second, one and two at a time;
2. drain: `queuectl worker start --count C --burst` on N `true` jobs, first start to last completion;
3. pickup latency: enqueue commit to job start with an idle worker, and the idle worker's CPU;
4. enqueue: one `queuectl enqueue` against `python -c "import click, sqlite3, json"` (bench/startup.py,
   which also runs alone: `make bench-startup`), and `enqueue --file` against a bare executemany
   insert of the same rows;
5. scale: the drain of (2) and `status` / `list` with a million completed jobs stored;
6. retention: 200,000 jobs that each print 10 KB drained with keep-completed 60s, against the
   same drain with retention off: the largest database-plus-WAL size on disk, and the drain rate.

(2), (3), the `enqueue --file` of (4), (5) and (7) run on PostgreSQL too, each right after its SQLite
run and reported beside it (as ratios to SQLite's figures as well), on a throwaway server that this
run starts (tests/support/pgserver.py) with a real server's durability: fsync and synchronous_commit on.
Without the server's binaries or psycopg (or with --no-postgresql) one line says why those figures
are skipped, and the SQLite ones are reported all the same.

7. viewers: the drain of (2), --count 2, while five viewers of `queuectl top` read every second (each a
   process doing what `top` does each interval, without a terminal: queuectl.tui.source.Source.read), against
   the same drain without them, in alternating rounds;
8. breakdown (bench/breakdown.py): where a job's time goes in an in-process worker's drain of (2)'s
   jobs, on each engine and psycopg implementation: spawn, wait, store and the rest, in
   microseconds per job, beside the spawn ceiling's.
9. dashboard (bench/dashboard.py): `queuectl web`'s pages timed on (5)'s million jobs, and its reads of the
   queue while many tabs poll its overview, on both engines.

Each figure is the median of several rounds. --smoke shrinks every size so the suite can run it.
Filling and draining a queue, and (3)'s pickup, are in bench/drains.py, shared with the other parts.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

# bench/drains.py (beside this file) puts the repository on sys.path before importing queuectl; its names
# are run's too (bench/ab.py runs `run.quiet_settings` and `run.drain_rate` of older trees).
from drains import ENV, PY, QUEUECTL, REPO, drain_rate, fill, fill_postgres, pickup, quiet_settings

from queuectl.domain.jobspec import NewJob  # noqa: E402
from queuectl.store import is_uri, open_store  # noqa: E402

SIZES = {
    "full": dict(rounds=3, spawn=2000, drain=2000, pickup=100, idle=10.0, cli=15, file=100_000, stored=1_000_000,
                 retention=200_000, keep=60, blocked=10_000, viewed=4000,
                 web_requests=50, web_clients=20, web_poll_s=10.0),
    "smoke": dict(rounds=1, spawn=50, drain=50, pickup=5, idle=0.5, cli=2, file=500, stored=2_000,
                  retention=300, keep=1, blocked=200, viewed=50,
                  web_requests=3, web_clients=3, web_poll_s=2.0),
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


# -- 4. enqueue --------------------------------------------------------------------------------------


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=ENV, check=True, input=stdin, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def file_rows(n: int) -> bytes:
    """n job lines for `enqueue --file`."""
    return "".join(json.dumps({"id": f"f{i}", "command": f"echo {i}"}) + "\n" for i in range(n)).encode()


def enqueue_file_rate(db: str, data: bytes, n: int) -> float:
    """Rows per second of `queuectl enqueue --file -` given `data` (n rows) into the new queue `db`."""
    open_store(db).close()  # the schema exists before the clock starts
    return n / timed([*QUEUECTL, "--db", db, "enqueue", "--file", "-"], stdin=data)


def enqueue_file(tmp: Path, data: bytes, n: int) -> dict:
    cli_rate = enqueue_file_rate(str(tmp / "file.db"), data, n)
    # The baseline: the same rows inserted by one executemany into a fresh queuectl database (same
    # schema, indexes and triggers, synchronous=FULL): what is left is parsing, checking and start-up.
    bare_db = str(tmp / "bare.db")
    open_store(bare_db).close()
    conn = sqlite3.connect(bare_db, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    now = time.time()
    rows = [(f"f{i}", "default", f"echo {i}", now, now, now) for i in range(n)]
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO jobs (id, queue, command, state, run_at, created_at, updated_at)"
                     " VALUES (?, ?, ?, 'pending', ?, ?, ?)", rows)
    conn.execute("COMMIT")
    bare_rate = n / (time.perf_counter() - start)
    conn.close()
    return {"cli_rows_per_s": cli_rate, "bare_rows_per_s": bare_rate, "ratio": cli_rate / bare_rate}


# -- 5. scale ----------------------------------------------------------------------------------------


def cli_time(db: str, runs: int, *args: str) -> float:
    return statistics.median(timed([*QUEUECTL, "--db", db, *args]) for _ in range(runs))


LIST_PENDING = ("list", "--state", "pending", "--limit", "100")


def scale(empty: str, big: str, size: dict, empty_drain: float) -> dict:
    """The drain (--count 2), `status` and `list` with size['stored'] completed jobs stored in the new
    queue `big`, as ratios of times to the same on `empty` (whose drain rate is `empty_drain`)."""
    runs = size["cli"]
    status_empty = cli_time(empty, runs, "status")
    list_empty = cli_time(empty, runs, *LIST_PENDING)
    quiet_settings(big)
    (fill_postgres if is_uri(big) else fill)(big, size["stored"], state="completed", prefix="old")
    fill(big, 100, command="true", prefix="later", state="pending")  # pending rows for `list`
    big_list = cli_time(big, runs, *LIST_PENDING)
    with open_store(big) as store:
        store.c.execute("UPDATE jobs SET state = 'completed' WHERE id LIKE ?", ("later%",))
    big_drain = median_of(size["rounds"], lambda: drain_rate(big, size["drain"], 2))
    big_status = cli_time(big, runs, "status")
    return {
        "stored_completed": size["stored"],
        "drain_ratio": empty_drain / big_drain,
        "status_ratio": big_status / status_empty,
        "list_ratio": big_list / list_empty,
        "drain_per_s": big_drain,
        "status_s": big_status, "status_empty_s": status_empty, "list_s": big_list, "list_empty_s": list_empty,
    }


def blocked(db: str, size: dict, empty_drain: float) -> dict:
    """The drain (--count 2) with size['blocked'] jobs blocked (after a job of a paused queue) in the new
    queue `db`, as a ratio of times to the same on an empty queue (whose drain rate is `empty_drain`)."""
    quiet_settings(db)
    with open_store(db) as store:
        now = store.clock()
        store.set_paused(["gate"], True, now)
        store.enqueue([NewJob("gate", "true", "gate", 0, None, now, None, None)], now)
        store.enqueue([NewJob(f"b{i}", "true", "default", 0, None, now, None, None, after=("gate",))
                       for i in range(size["blocked"])], now)
        assert store.counts()["default"]["blocked"] == size["blocked"]
    rate = median_of(size["rounds"], lambda: drain_rate(db, size["drain"], 2))
    return {"blocked": size["blocked"], "drain_per_s": rate, "drain_ratio": empty_drain / rate}


def limited(db: str, size: dict, empty_drain: float) -> dict:
    """The drain (--count 2) of a queue with a concurrency and a rate limit in force that never bind (100 at
    once, 100,000 a second) in the new queue `db`, as a ratio of times to the same without (`empty_drain`):
    the cost of claims that keep limits."""
    quiet_settings(db)
    with open_store(db) as store:
        store.set_limit("default", store.clock(), concurrency=100, rate=(100_000, 1.0))
    rate = median_of(size["rounds"], lambda: drain_rate(db, size["drain"], 2))
    return {"drain_per_s": rate, "drain_ratio": empty_drain / rate}


# -- 6. retention -----------------------------------------------------------------------------------


def disk_bytes(db: str) -> int:
    """The database and its WAL on disk, in bytes."""
    return sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))


def retention_run(db: str, n: int, keep: str) -> dict:
    """Drain n jobs that print 10 KB each with keep-completed `keep`; sample the size on disk meanwhile."""
    quiet_settings(db)
    with open_store(db) as store:
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
    with open_store(db) as store:
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


# -- 7. viewers -------------------------------------------------------------------------------------

#: A viewer of `queuectl top` without its terminal: python -c VIEWER DB INTERVAL.
VIEWER = """
import sys, time
from queuectl.store import open_store
from queuectl.tui.source import Source
source, every = Source(open_store(sys.argv[1])), float(sys.argv[2])
print("reading", flush=True)
while True:
    source.read()
    time.sleep(every)
"""


def viewed(db: str, size: dict, viewers: int = 5, interval: float = 1.0) -> dict:
    """The drain (--count 2) of size['viewed'] jobs in the new queue `db` with `viewers` top viewers reading
    every `interval` seconds, against the same without them: rounds alternate (the order swapped each round)."""
    quiet_settings(db)
    rates: dict[bool, list[float]] = {False: [], True: []}
    for r in range(size["rounds"]):
        for watched in ((False, True) if r % 2 == 0 else (True, False)):
            procs = [subprocess.Popen([PY, "-c", VIEWER, db, str(interval)], env=ENV, stdout=subprocess.PIPE)
                     for _ in range(viewers if watched else 0)]
            try:
                for p in procs:  # imported, and reading, before the drain starts
                    assert p.stdout.readline() == b"reading\n", "a viewer did not start"
                rates[watched].append(drain_rate(db, size["viewed"], 2))
                assert all(p.poll() is None for p in procs), "a viewer died during the drain"
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    without, with_ = statistics.median(rates[False]), statistics.median(rates[True])
    return {"viewers": viewers, "interval_s": interval, "jobs": size["viewed"], "without_per_s": without,
            "with_per_s": with_, "ratio": with_ / without}


# -- PostgreSQL ------------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_server(wanted: bool):
    """Yield (server, None): a throwaway PostgreSQL server with fsync and synchronous_commit on,
    started by tests/support/pgserver.py and removed when the block ends, error or not; or (None, why) when
    the PostgreSQL figures are to be skipped (not wanted, or no server binaries or psycopg here)."""
    path = REPO / "tests" / "support" / "pgserver.py"
    if not wanted:
        yield None, "--no-postgresql given"
        return
    if not path.exists():
        yield None, f"{path} (which starts the server) is missing"
        return
    spec = importlib.util.spec_from_file_location("queuectl_bench_pgserver", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    why = module.PgServer.missing()
    if why is not None:
        yield None, why
        return
    # In the temporary directory's filesystem, as the SQLite databases (not in that directory
    # itself: run as root, the server runs as postgres, who cannot enter it).
    server = module.PgServer(base=Path(tempfile.gettempdir()), durable=True)
    try:
        server.start()
        yield server, None
    finally:
        server.cleanup()


def server_info(server) -> dict:
    """The server's version and the settings that decide its commits' cost; refuses a server without durability."""
    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers")
    info = dict(server.sql("SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                           params=[list(names)]))
    if (info.get("fsync"), info.get("synchronous_commit")) != ("on", "on"):
        raise RuntimeError(f"the benchmark's PostgreSQL server must commit durably: {info}")
    return info


def psycopg_info() -> dict:
    """The psycopg that the commands import here: its version, implementation (psycopg.pq.__impl__:
    "c", "binary" or "python", the first that imports unless PSYCOPG_IMPL names one) and libpq's version."""
    import psycopg

    return {"version": psycopg.__version__, "impl": psycopg.pq.__impl__, "libpq": psycopg.pq.version()}


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # so that a `kill` still removes the server and the temporary files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check the benchmark runs")
    parser.add_argument("--json", default=str(REPO / "bench" / "results.json"), help="write results here")
    parser.add_argument("--no-postgresql", action="store_true", help="SQLite figures only")
    args = parser.parse_args()
    size = SIZES["smoke" if args.smoke else "full"]
    signal.signal(signal.SIGTERM, _terminate)
    # Time the code as installed: with bytecode compiled (pip and the .deb compile it; a run with
    # PYTHONDONTWRITEBYTECODE set would otherwise recompile every module on every start).
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "queuectl")], check=True)
    r, out = size["rounds"], {"machine": machine(), "sizes": size}
    with tempfile.TemporaryDirectory(prefix="queuectl-bench-") as tmpdir, \
            postgres_server(not args.no_postgresql) as (server, skipped):
        tmp = Path(tmpdir)
        # Each PostgreSQL figure is measured right after its SQLite counterpart, in a new database.
        pg = out["postgresql"] = {"skipped": skipped} if server is None else {"server": server_info(server),
                                                                                    "psycopg": psycopg_info()}
        ceiling = {c: median_of(r, lambda: spawn_rate(size["spawn"], c)) for c in (1, 2)}
        out["spawn_per_s"] = ceiling
        empty = str(tmp / "empty.db")
        quiet_settings(empty)
        if server:
            pg_empty = server.create_database("empty")
            quiet_settings(pg_empty)
        drains, pg_drains = {}, {}
        for c in (1, 2):
            drains[c] = median_of(r, lambda: drain_rate(empty, size["drain"], c))
            if server:
                pg_drains[c] = median_of(r, lambda: drain_rate(pg_empty, size["drain"], c))
        out["drain_per_s"] = drains
        out["drain_ratio"] = {c: drains[c] / ceiling[c] for c in (1, 2)}
        if server:
            pg["drain_per_s"] = pg_drains
            pg["drain_ratio"] = {c: pg_drains[c] / ceiling[c] for c in (1, 2)}
            pg["drain_vs_sqlite"] = {c: pg_drains[c] / drains[c] for c in (1, 2)}
        import breakdown  # here: it imports this file as `run`

        out["breakdown"] = breakdown.breakdown(tmp, server, ceiling, size["drain"], r)
        out["pickup"] = pickup(str(tmp / "pickup.db"), size["pickup"], size["idle"])
        if server:
            pg["pickup"] = pickup(server.create_database("pickup"), size["pickup"], size["idle"])
        import startup  # bench/startup.py, beside this file

        out["enqueue"] = startup.enqueue_cli(str(tmp / "cli.db"), size["cli"])
        rows = file_rows(size["file"])
        out["enqueue_file"] = enqueue_file(tmp, rows, size["file"])
        if server:
            rate = enqueue_file_rate(server.create_database("file"), rows, size["file"])
            pg["enqueue_file"] = {"cli_rows_per_s": rate, "vs_sqlite": rate / out["enqueue_file"]["cli_rows_per_s"]}
        s = out["scale"] = scale(empty, str(tmp / "big.db"), size, drains[2])
        import dashboard  # bench/dashboard.py: it imports this file as `run`

        out["dashboard"] = dashboard.dashboard(str(tmp / "big.db"), size["stored"], size)
        if server:
            ps = pg["scale"] = scale(pg_empty, pg_big := server.create_database("big"), size, pg_drains[2])
            ps["status_vs_sqlite"] = ps["status_s"] / s["status_s"]
            ps["list_vs_sqlite"] = ps["list_s"] / s["list_s"]
            pg["dashboard"] = dashboard.dashboard(pg_big, size["stored"], size)
        out["blocked"] = blocked(str(tmp / "blocked.db"), size, drains[2])
        if server:
            pg["blocked"] = blocked(server.create_database("blocked"), size, pg_drains[2])
        out["limited"] = limited(str(tmp / "limited.db"), size, drains[2])
        if server:
            pg["limited"] = limited(server.create_database("limited"), size, pg_drains[2])
        out["viewed"] = viewed(str(tmp / "viewed.db"), size)
        if server:
            pg["viewed"] = viewed(server.create_database("viewed"), size)
        out["retention"] = retention(tmp, size["retention"], size["keep"])
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    report(out)


def machine() -> dict:
    import platform

    return {"cpus": os.cpu_count(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "kernel": platform.release(), "date": time.strftime("%Y-%m-%d")}


def report(out: dict) -> None:
    import startup

    c, d, p, e, f, s, k = (out[k] for k in ("spawn_per_s", "drain_per_s", "pickup", "enqueue", "enqueue_file",
                                            "scale", "retention"))
    rows = [
        ("spawn ceiling, 1 / 2 at a time", f"{c[1]:.0f} / {c[2]:.0f} per s", ""),
        ("drain --count 1", f"{d[1]:.0f} jobs/s", f"{out['drain_ratio'][1]:.2f} of ceiling (target >= 0.80)"),
        ("drain --count 2", f"{d[2]:.0f} jobs/s", f"{out['drain_ratio'][2]:.2f} of ceiling (target >= 0.85)"),
        ("pickup latency p50 / p95 / p99", f"{p['p50_ms']:.1f} / {p['p95_ms']:.1f} / {p['p99_ms']:.1f} ms",
         "target p50 <= 5, p99 <= 25 ms"),
        ("idle worker CPU", f"{p['idle_cpu_percent']:.2f} % of a core", "target <= 0.5 %"),
        startup.row(e),
        ("enqueue --file vs bare insert", f"{f['cli_rows_per_s']:.0f} vs {f['bare_rows_per_s']:.0f} rows/s",
         f"{f['ratio']:.2f}x (target >= 0.5x)"),
        (f"drain with {s['stored_completed']:,} stored", "", f"{s['drain_ratio']:.2f}x empty (target <= 1.05x)"),
        ("status / list --limit 100, stored", "", f"{s['status_ratio']:.2f}x / {s['list_ratio']:.2f}x empty"
         " (target <= 1.2x)"),
        (f"drain with {out['blocked']['blocked']:,} blocked", f"{out['blocked']['drain_per_s']:.0f} jobs/s",
         f"{out['blocked']['drain_ratio']:.2f}x empty (target <= 1.05x)"),
        ("drain with limits in force", f"{out['limited']['drain_per_s']:.0f} jobs/s",
         f"{out['limited']['drain_ratio']:.2f}x without (target <= 1.10x)"),
        viewed_row("", out["viewed"], "(target >= 0.95x)"),
        (f"{k['jobs']:,} jobs of 10 KB, keep-completed {k['keep_s']}s", f"largest {k['max_bytes_on'] / 2**20:.0f} MiB",
         f"{k['max_over_live']:.2f}x the live jobs' {k['live_bytes'] / 2**20:.0f} MiB; without retention"
         f" {k['max_bytes_off'] / 2**20:.0f} MiB"),
        ("drain with retention vs without", f"{k['drain_on_per_s']:.0f} vs {k['drain_off_per_s']:.0f} jobs/s",
         f"{k['drain_ratio']:.2f}x (target >= 0.9x)"),
    ]
    pg = out["postgresql"]
    import dashboard

    rows += dashboard.rows(out["dashboard"])
    if "skipped" not in pg:
        rows += postgres_rows(out) + dashboard.rows(pg["dashboard"], "pg: ", out["dashboard"])
    width = max(len(r[0]) for r in rows)
    for name, value, ratio in rows:
        print(f"{name:<{width}}  {value:<26} {ratio}")
    if "skipped" in pg:
        print(f"PostgreSQL figures skipped: {pg['skipped']}")
    import breakdown

    print("\n".join(breakdown.table(out["breakdown"])))


def viewed_row(engine: str, v: dict, note: str) -> tuple[str, str, str]:
    return (f"{engine}drain with {v['viewers']} top viewers at {v['interval_s']:g} s",
            f"{v['with_per_s']:.0f} vs {v['without_per_s']:.0f} jobs/s", f"{v['ratio']:.2f}x without {note}")


def postgres_rows(out: dict) -> list[tuple[str, str, str]]:
    """The summary's PostgreSQL lines: each figure beside SQLite's of the same run."""
    pg, v, psy = out["postgresql"], out["postgresql"]["server"], out["postgresql"]["psycopg"]
    d, p, f, s = pg["drain_per_s"], pg["pickup"], pg["enqueue_file"], pg["scale"]
    sp, ss = out["pickup"], out["scale"]
    return [
        (f"PostgreSQL {v['server_version']}", f"fsync {v['fsync']}",
         f"synchronous_commit {v['synchronous_commit']}, shared_buffers {v['shared_buffers']}; psycopg"
         f" {psy['version']} ({psy['impl']} implementation, libpq {psy['libpq']})"),
        *((f"pg: drain --count {c}", f"{d[c]:.0f} jobs/s",
           f"{pg['drain_ratio'][c]:.2f} of ceiling; {pg['drain_vs_sqlite'][c]:.2f}x SQLite's {out['drain_per_s'][c]:.0f}")
          for c in (1, 2)),
        ("pg: pickup latency p50 / p95", f"{p['p50_ms']:.1f} / {p['p95_ms']:.1f} ms",
         f"SQLite {sp['p50_ms']:.1f} / {sp['p95_ms']:.1f} ms"),
        ("pg: idle worker CPU", f"{p['idle_cpu_percent']:.2f} % of a core",
         f"SQLite {sp['idle_cpu_percent']:.2f} % (the server's own CPU not counted)"),
        ("pg: enqueue --file", f"{f['cli_rows_per_s']:.0f} rows/s",
         f"{f['vs_sqlite']:.2f}x SQLite's {out['enqueue_file']['cli_rows_per_s']:.0f}"),
        (f"pg: drain with {s['stored_completed']:,} stored", f"{s['drain_per_s']:.0f} jobs/s",
         f"{s['drain_ratio']:.2f}x empty (SQLite {ss['drain_ratio']:.2f}x)"),
        (f"pg: drain with {pg['blocked']['blocked']:,} blocked", f"{pg['blocked']['drain_per_s']:.0f} jobs/s",
         f"{pg['blocked']['drain_ratio']:.2f}x empty (SQLite {out['blocked']['drain_ratio']:.2f}x)"),
        ("pg: drain with limits in force", f"{pg['limited']['drain_per_s']:.0f} jobs/s",
         f"{pg['limited']['drain_ratio']:.2f}x without (SQLite {out['limited']['drain_ratio']:.2f}x)"),
        viewed_row("pg: ", pg["viewed"], f"(SQLite {out['viewed']['ratio']:.2f}x)"),
        ("pg: status / list --limit 100, stored", f"{s['status_s'] * 1000:.0f} / {s['list_s'] * 1000:.0f} ms",
         f"{s['status_ratio']:.2f}x / {s['list_ratio']:.2f}x empty; {s['status_vs_sqlite']:.2f}x /"
         f" {s['list_vs_sqlite']:.2f}x SQLite's {ss['status_s'] * 1000:.0f} / {ss['list_s'] * 1000:.0f} ms"),
    ]


if __name__ == "__main__":
    main()
