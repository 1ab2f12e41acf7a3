#!/usr/bin/env python3
"""What viewers of `queuectl top` cost the workers: drains with none and with VIEWERS reading every second.

    python bench/top_viewers.py [--rounds 3] [--jobs 2000] [--count 2] [--viewers 5] [--db PATH|URI]

Each viewer is a process that does what `top` does each interval, without a terminal: one
queuectl.tui.source.Source.read (a snapshot, the running and newest dead jobs, an hour of history)
every --interval seconds. Rounds alternate without and with viewers (the order swapped each
round); printed: each side's median drain rate (bench/run.py's drain_rate) and with over without
(the issue's bar: at least 0.95 with 5 viewers at 1 s).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import run  # bench/run.py, beside this file

VIEWER = """
import sys, time
from queuectl.store import open_store
from queuectl.tui.source import Source
source, every = Source(open_store(sys.argv[1])), float(sys.argv[2])
while True:
    source.read()
    time.sleep(every)
"""


def drain(db: str, jobs: int, count: int, viewers: int, interval: float) -> float:
    """One drain's rate (jobs/s) with `viewers` reading every `interval` seconds meanwhile."""
    procs = [subprocess.Popen([sys.executable, "-c", VIEWER, db, str(interval)], env=run.ENV) for _ in range(viewers)]
    try:
        time.sleep(0.5 if viewers else 0)  # their imports done before the drain starts
        return run.drain_rate(db, jobs, count)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--count", type=int, default=2)
    parser.add_argument("--viewers", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--db", help="a SQLite path or PostgreSQL URI (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"{tmp}/bench.db"
        run.quiet_settings(db)
        rates: dict[int, list[float]] = {0: [], args.viewers: []}
        for r in range(args.rounds):
            order = (0, args.viewers) if r % 2 == 0 else (args.viewers, 0)
            for v in order:
                rates[v].append(drain(db, args.jobs, args.count, v, args.interval))
                print(f"round {r + 1}: {v} viewers: {rates[v][-1]:.0f} jobs/s", flush=True)
        without, with_ = statistics.median(rates[0]), statistics.median(rates[args.viewers])
        print(f"median without viewers {without:.0f} jobs/s, with {args.viewers} at {args.interval:g} s"
              f" {with_:.0f} jobs/s: {with_ / without:.3f}x")


if __name__ == "__main__":
    main()
