#!/usr/bin/env python3
"""Where a job's time goes: a worker's drain of `true` jobs cut into spawn, wait, store and the rest.

    python bench/breakdown.py [--smoke] [--no-postgresql] [--json FILE]

An in-process worker (queuectl.worker.Worker(store, name, slots=C, burst=True).run()) drains N
`true` jobs, --count 1 and 2, on SQLite and on a throwaway PostgreSQL server with durable commits
(bench/run.py's), once per psycopg implementation that imports here (psycopg.pq.__impl__:
"python", "binary", "c"; chosen by PSYCOPG_IMPL). Timing wrappers (time.perf_counter_ns) split
the wall time of run() into, per job, in microseconds:

- spawn: the runner's start() (pipes, posix_spawn, the selector's registrations);
- wait:  the runner's wait() (select until a job ends or writes, reading it, reaping it);
- store: every call of a public method of the worker's store (SQL, commits, round trips);
- rest:  the wall time less those three: the worker's own Python (its log lines too, sent to /dev/null);

calls nested in a timed call are not timed again, so the four add up to the total. `statements`
is statements per job: on SQLite each statement run (its trace callback), on PostgreSQL each round
trip of psycopg's connection (a statement, BEGIN or COMMIT); "n/a" where the store's connection is
not found. Every row runs in a process of its own (`--drain`), alternating uninstrumented and
instrumented drains; the row is the instrumented round whose total is the median, and `overhead`
is the instrumented rate over the uninstrumented one (1.0: the wrappers cost nothing measurable).
bench/run.py runs this after its drains and prints it beside the spawn ceiling's microseconds per job.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run as bench

from queuectl.store import open_store  # noqa: E402  (run put the repository on sys.path)

PARTS = ("spawn", "wait", "store", "rest")
IMPLS = ("python", "binary", "c")
#: The exit code of a --drain child whose requested psycopg implementation does not import.
NO_IMPL = 3


# -- timing ------------------------------------------------------------------------------------------


class Timer:
    """Nanoseconds spent in wrapped callables, by part; a call inside a timed call is not timed again.

    `ns` is wall time by part; `store_cpu_ns` the CPU time of this thread within the store's calls
    (the client's share of them: SQLite's work, psycopg's Python and libpq; not the server's).
    """

    def __init__(self):
        self.reset()
        self._inside = False

    def reset(self) -> None:
        """Forget what was timed so far (the worker's construction is not the drain's)."""
        self.ns = dict.fromkeys(PARTS[:-1], 0)
        self.store_cpu_ns = 0

    def wrap(self, fn, part: str):
        """`fn` with its calls' nanoseconds added to `part`."""
        cpu = part == "store"

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if self._inside:
                return fn(*args, **kwargs)
            self._inside = True
            start = time.perf_counter_ns()  # the CPU clock's reads nest inside the wall clock's
            cpu_start = time.thread_time_ns() if cpu else 0
            try:
                return fn(*args, **kwargs)
            finally:
                if cpu:
                    self.store_cpu_ns += time.thread_time_ns() - cpu_start
                self.ns[part] += time.perf_counter_ns() - start
                self._inside = False

        return timed


def wrap_store(store, timer: Timer) -> list[str]:
    """Time every public method of `store` (its own and its classes') as "store"; return their names.

    Only functions and methods are wrapped: not properties (PostgreSQL's connection), classes
    (exception types), nor callable objects (a sqlite3.Connection is one).
    """
    names = []
    for name in dir(store):
        if name.startswith("_") or isinstance(inspect.getattr_static(store, name, None), property):
            continue
        value = getattr(store, name)
        if inspect.isroutine(value):
            setattr(store, name, timer.wrap(value, "store"))
            names.append(name)
    return names


def wrap_runner(runner, timer: Timer) -> None:
    """Time the runner's start() as "spawn" and its wait() as "wait"."""
    runner.start = timer.wrap(runner.start, "spawn")
    runner.wait = timer.wrap(runner.wait, "wait")


# -- counting statements -------------------------------------------------------------------------------


class Statements:
    """Statements the store's connections send: SQLite's trace callback, psycopg's connection round trips."""

    def __init__(self):
        self.count = 0
        self._last = None

    def traced(self, sql: str) -> None:
        """SQLite's trace callback. A statement whose trigger runs is reported again with the same
        text (Python's callback gives the statement's expanded SQL for its trigger programs too):
        the repeats are not counted."""
        if sql != self._last:
            self.count += 1
        self._last = sql

    def wrap(self, fn):
        """psycopg's Connection.wait, which every execute, BEGIN and COMMIT goes through once."""
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            self.count += 1
            return fn(*args, **kwargs)

        return counted


def connections(store) -> list:
    """The database connections among the store's attributes and their attributes, by duck type."""
    found, seen = [], set()
    layer = list(getattr(store, "__dict__", {}).values())
    for _ in range(2):
        nested = []
        for value in layer:
            if id(value) in seen or inspect.isroutine(value) or isinstance(value, type):
                continue
            seen.add(id(value))
            if isinstance(value, sqlite3.Connection) or (hasattr(value, "pgconn") and callable(getattr(value, "wait", None))):
                found.append(value)
            else:
                nested.extend(getattr(value, "__dict__", {}).values())
        layer = nested
    return found


def count_statements(store) -> Statements | None:
    """Count the statements of the store's connections from now on; None if none was found."""
    conns = connections(store)
    if not conns:
        return None
    counter = Statements()
    for conn in conns:
        if isinstance(conn, sqlite3.Connection):
            conn.set_trace_callback(counter.traced)
        else:
            conn.wait = counter.wrap(conn.wait)
    return counter


# -- one drain (in a --drain child) -------------------------------------------------------------------


def quiet_logging() -> None:
    """The worker's log lines, as `queuectl worker start` writes them, to /dev/null (they cost a share)."""
    sink = open(os.devnull, "w")  # noqa: SIM115  (for the process's life)
    try:
        from queuectl.host import logsetup

        logsetup.configure(stream=sink)
    except (ImportError, TypeError, AttributeError):
        handler = logging.StreamHandler(sink)
        logging.getLogger("queuectl").handlers[:] = [handler]
        logging.getLogger("queuectl").setLevel(logging.INFO)


def drain_once(db: str, n: int, count: int, instrument: bool) -> dict:
    """Drain n new `true` jobs with an in-process worker; its wall time and parts in nanoseconds.

    Returns {"wall_ns", "cpu_ns" (this process's, user and system), "spawn_ns", "wait_ns",
    "store_ns", "store_cpu_ns", "statements"} (the parts and the statement count only if
    `instrument`; statements None where no connection was found).
    """
    from queuectl.worker import Worker

    prefix = f"b{time.monotonic_ns()}-"
    bench.fill(db, n, prefix=prefix)
    timer, counter = Timer(), None
    store = open_store(db, session=True)
    try:
        if instrument:
            wrap_store(store, timer)
        worker = Worker(store, f"bench-{os.getpid()}", slots=count, burst=True)
        if instrument:
            wrap_runner(worker.runner, timer)
            counter = count_statements(store)
        timer.reset()
        if counter is not None:
            counter.count = 0
        start = time.perf_counter_ns()
        cpu_start = time.process_time_ns()
        code = worker.run()
        cpu = time.process_time_ns() - cpu_start
        wall = time.perf_counter_ns() - start
        parts = dict(timer.ns, store_cpu=timer.store_cpu_ns)  # before close(), a store call but not the drain's
        statements = None if counter is None else counter.count
    finally:
        store.close()
    if code != 0:
        raise RuntimeError(f"the worker exited {code}")
    with open_store(db) as check:
        done = check.c.execute("SELECT count(*) FROM jobs WHERE id LIKE ? AND state = 'completed'",
                               (prefix + "%",)).fetchone()[0]
    if done != n:
        raise RuntimeError(f"drained {done} of {n}")
    out = {"wall_ns": wall, "cpu_ns": cpu}
    if instrument:
        out.update({f"{part}_ns": ns for part, ns in parts.items()})
        out["statements"] = statements
    return out


def per_job(drain: dict, n: int) -> dict:
    """One instrumented drain as microseconds per job (rounded to 0.01); rest = total - the parts.

    Beside the parts (wall time): store_cpu, the CPU time within the store's calls, and cpu, the
    worker process's whole CPU time (user and system; not its jobs', not the server's).
    """
    parts_ns = {part: drain[f"{part}_ns"] for part in PARTS[:-1]}
    parts_ns["rest"] = drain["wall_ns"] - sum(parts_ns.values())
    row = {f"{part}_us": round(ns / n / 1000, 2) for part, ns in parts_ns.items()}
    row["total_us"] = round(drain["wall_ns"] / n / 1000, 2)
    row["store_cpu_us"] = round(drain["store_cpu_ns"] / n / 1000, 2)
    row["cpu_us"] = round(drain["cpu_ns"] / n / 1000, 2)
    row["statements_per_job"] = None if drain["statements"] is None else round(drain["statements"] / n, 2)
    return row


def rate(drains: list[dict], n: int) -> float:
    """The median of drains of n jobs each, in jobs per second of wall time."""
    return statistics.median(n / (d["wall_ns"] / 1e9) for d in drains)


def measure_row(db: str, n: int, count: int, rounds: int) -> dict:
    """`rounds` uninstrumented and instrumented drains, alternating; the median instrumented round per job."""
    plain, timed = [], []
    for _ in range(rounds):
        plain.append(drain_once(db, n, count, instrument=False))
        timed.append(drain_once(db, n, count, instrument=True))
    median = sorted(timed, key=lambda d: d["wall_ns"])[(rounds - 1) // 2]
    row = per_job(median, n)
    row.update(plain_per_s=round(rate(plain, n), 1), instrumented_per_s=round(rate(timed, n), 1),
               overhead=round(rate(timed, n) / rate(plain, n), 3))
    return row


def child(args) -> int:
    """--drain: one row as JSON on stdout; exit NO_IMPL if the requested psycopg implementation does not import."""
    impl = None
    if args.impl is not None:
        try:
            import psycopg
        except ImportError as e:
            print(str(e).splitlines()[0], file=sys.stderr)
            return NO_IMPL
        impl = psycopg.pq.__impl__
        if impl != args.impl:
            raise RuntimeError(f"PSYCOPG_IMPL={args.impl} gave the {impl!r} implementation")
    bench.quiet_settings(args.drain)
    quiet_logging()
    row = {"engine": "postgresql" if args.impl else "sqlite", "count": args.count, "impl": impl,
           **measure_row(args.drain, args.jobs, args.count, args.rounds)}
    print(json.dumps(row))
    return 0


# -- every row (in the bench's process) -------------------------------------------------------------


def run_row(db: str, n: int, count: int, rounds: int, impl: str | None) -> dict | str:
    """One row from a --drain child; on PostgreSQL with PSYCOPG_IMPL=impl. A str: why the impl is missing."""
    env = {**bench.ENV, **({"PSYCOPG_IMPL": impl} if impl else {})}
    argv = [bench.PY, __file__, "--drain", db, "--count", str(count), "--jobs", str(n), "--rounds", str(rounds),
            *(["--impl", impl] if impl else [])]
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode == NO_IMPL:
        return r.stderr.strip() or f"psycopg's {impl} implementation does not import"
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}:\n{r.stderr}")
    return json.loads(r.stdout)


def breakdown(tmp: Path, server, ceiling: dict, n: int, rounds: int) -> dict:
    """Every row: SQLite, then PostgreSQL (`server`, or None) once per psycopg implementation here.

    `ceiling` is the spawn ceiling in runs per second by concurrency (1, 2), given as µs per job.
    Each row drains in a new database (a file in `tmp`, or one on the server).
    """
    rows, missing = [], {}
    for count in (1, 2):
        rows.append(run_row(str(tmp / f"breakdown-{count}.db"), n, count, rounds, None))
    if server is not None:
        for impl in IMPLS:
            for count in (1, 2):
                row = run_row(server.create_database(f"breakdown_{impl}_{count}"), n, count, rounds, impl)
                if isinstance(row, str):
                    missing[impl] = row
                    break
                rows.append(row)
    for row in rows:
        row["ceiling_us"] = round(1e6 / ceiling[row["count"]], 2)
    return {"jobs": n, "rounds": rounds, "rows": rows, "psycopg_missing": missing}


def table(result: dict) -> list[str]:
    """The breakdown as printed lines: a row per engine, count and psycopg implementation."""
    head = ("engine", "count", "spawn", "wait", "store", "rest", "total", "stmts", "ceiling", "store-cpu", "cpu",
            "overhead")
    lines = [f"breakdown: microseconds per job, an in-process worker draining {result['jobs']:,} `true` jobs"
             f" (median of {result['rounds']} round(s))",
             "  spawn + wait + store + rest = total (wall time); stmts: statements (SQLite) or round trips"
             " (PostgreSQL) per job",
             "  ceiling: the spawn ceiling's; store-cpu / cpu: the worker's CPU time in store calls / in all;"
             " overhead: timed rate / untimed rate"]
    cells = [head]
    for r in result["rows"]:
        engine = r["engine"] if r["impl"] is None else f"pg/{r['impl']}"
        stmts = "n/a" if r["statements_per_job"] is None else f"{r['statements_per_job']:.1f}"
        cells.append((engine, str(r["count"]), *(f"{r[f'{p}_us']:.0f}" for p in (*PARTS, "total")), stmts,
                      f"{r['ceiling_us']:.0f}", f"{r['store_cpu_us']:.0f}", f"{r['cpu_us']:.0f}", f"{r['overhead']:.2f}"))
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cell, widths)))
              for cell in cells]
    lines += [f"psycopg {impl} not measured: {why}" for impl, why in result["psycopg_missing"].items()]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="bench/run.py's tiny sizes")
    parser.add_argument("--no-postgresql", action="store_true", help="SQLite rows only")
    parser.add_argument("--json", help="write the breakdown under the 'breakdown' key of this file (kept otherwise)")
    parser.add_argument("--drain", metavar="DB", help=argparse.SUPPRESS)  # one row, in a child
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--impl", choices=IMPLS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drain:
        return child(args)
    size = bench.SIZES["smoke" if args.smoke else "full"]
    ceiling = {c: bench.median_of(size["rounds"], lambda: bench.spawn_rate(size["spawn"], c)) for c in (1, 2)}
    with tempfile.TemporaryDirectory(prefix="queuectl-breakdown-") as tmpdir, \
            bench.postgres_server(not args.no_postgresql) as (server, skipped):
        result = breakdown(Path(tmpdir), server, ceiling, size["drain"], size["rounds"])
    result["machine"] = bench.machine()
    if args.json:
        path = Path(args.json)
        out = json.loads(path.read_text()) if path.exists() else {}
        out["breakdown"] = result
        path.write_text(json.dumps(out, indent=2) + "\n")
    print("\n".join(table(result)))
    if skipped:
        print(f"PostgreSQL rows skipped: {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
