#!/usr/bin/env python3
"""Start-up: one `queuectl enqueue` against `python -c "import click, sqlite3, json"`, as a ratio.

    python bench/startup.py [--runs N] [--json FILE]

The two commands run in turn (A B A B ...) after a warm-up, each a new process, on a new
SQLite database (QUEUECTL_DB, no configuration file); the figure is the median of the pair
by pair ratios, which holds when the machine's speed drifts, beside each command's median
wall time. It also counts the queuectl modules the enqueue imports (queuectl's own start-up
cost is what the ratio is about). `make bench` runs it as its section 4; `make bench-startup`
runs it alone, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BASELINE = [PY, "-c", "import click, sqlite3, json"]
#: The most a `queuectl enqueue` may cost, as a multiple of the baseline's wall time (issue 26).
TARGET = 1.3


def _env(db: str) -> dict:
    return {**os.environ, "QUEUECTL_CONFIG": "", "QUEUECTL_DB": db, "PYTHONPATH": str(REPO)}


def _timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def imported_modules(db: str) -> list[str]:
    """Return the queuectl modules that one `queuectl enqueue` imports, sorted."""
    script = ("import atexit, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr));"
              "sys.argv[0] = 'queuectl'; from queuectl.cli import main; main()")
    r = subprocess.run([PY, "-c", script, "enqueue", '{"command":"true"}'], env=_env(db), check=True,
                       capture_output=True, text=True)
    return [m for m in r.stderr.split() if m == "queuectl" or m.startswith("queuectl.")]


def enqueue_cli(db: str, runs: int) -> dict:
    """Time `runs` pairs of (one enqueue into `db`, the import baseline), after one warm-up pair; return the
    medians (seconds), the median pair ratio and the queuectl modules imported."""
    env = _env(db)
    counter = iter(range(10**9))

    def enqueue() -> float:
        return _timed([PY, "-m", "queuectl", "enqueue", '{"command":"true","id":"c%d"}' % next(counter)], env)

    enqueue(), _timed(BASELINE, env)  # warm-up: the database made, the page cache filled
    ones, bases = [], []
    for _ in range(runs):
        ones.append(enqueue())
        bases.append(_timed(BASELINE, env))
    return {"enqueue_s": statistics.median(ones), "import_baseline_s": statistics.median(bases),
            "ratio": statistics.median(a / b for a, b in zip(ones, bases)), "target": TARGET,
            "queuectl_modules": len(imported_modules(db))}


def row(e: dict) -> tuple[str, str, str]:
    """The report's row for the figures of `enqueue_cli`."""
    return ("one enqueue vs import baseline", f"{e['enqueue_s'] * 1000:.0f} vs {e['import_baseline_s'] * 1000:.0f} ms",
            f"{e['ratio']:.2f}x (target <= {e.get('target', TARGET)}x); {e.get('queuectl_modules', '?')} modules")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="pairs timed (default 15)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    # Time the code as installed: with bytecode compiled (see run.py).
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "queuectl")], check=True)
    with tempfile.TemporaryDirectory(prefix="queuectl-startup-") as tmp:
        out = enqueue_cli(str(Path(tmp) / "cli.db"), args.runs)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    name, value, ratio = row(out)
    print(f"{name}  {value}  {ratio}")


if __name__ == "__main__":
    main()
