#!/usr/bin/env python3
"""Drains of this tree against another revision's, in alternating rounds: the A/B that a change to the hot path owes.

    python bench/ab.py REV [--rounds 5] [--jobs 2000] [--counts 1 2] [--no-postgresql] [--limited] [--json FILE]

REV (a commit, branch or tag of this repository) is checked out in a temporary git worktree. Each
round drains `--jobs` `true` jobs with `queuectl worker start --count C --burst` once with REV's
code and once with this tree's (bench/run.py's `drain_rate`, each tree's own), the order swapped
every round so that neither always runs on a warmer machine; on SQLite each tree has a database file
of its own, on PostgreSQL a database of its own on one throwaway server (the trees' schemas may
differ). Printed per engine and count: the median rate of each, this tree's over REV's (above 1 is
faster), and the CPU per job of the worker and its jobs (this tree's over REV's; below 1 is
cheaper). Rates on these 2-core machines move by 10 % from round to round; the medians of
alternating rounds are what to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import run  # bench/run.py, beside this file: the server and the environment of the benchmark

# One drain in a child process, with TREE's bench/run.py (so TREE's queuectl, by its PYTHONPATH):
# prints the rate and the CPU seconds of the worker and its jobs.
DRAIN = """
import json, resource, sys
tree, db, n, count, limited = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "limited"
sys.path[:0] = [tree + "/bench"]
import run
assert str(run.REPO) == tree, (run.REPO, tree)
run.quiet_settings(db)
if limited:  # as bench/run.py's limited(): limits in force that never bind
    with run.open_store(db) as store:
        store.set_limit("default", store.clock(), concurrency=100, rate=(100_000, 1.0))
rate = run.drain_rate(db, n, count)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
# The queuectl that the drain's worker (`python -m queuectl`, run.ENV, this directory) imported.
code = run.subprocess.run([run.PY, "-c", "import queuectl; print(queuectl.__file__)"], env=run.ENV,
                          check=True, capture_output=True, text=True).stdout.strip()
print(json.dumps({"rate": rate, "cpu": r.ru_utime + r.ru_stime, "code": code}))
"""


def drain(tree: Path, db: str, jobs: int, count: int, limited: bool = False) -> dict:
    """Drain `jobs` jobs into `db` with `tree`'s code (`limited`: with limits in force that never bind, as
    bench/run.py's limited drain); return {"rate": jobs/s, "cpu": seconds}."""
    # In the tree: `python -m queuectl` puts its working directory first on sys.path.
    env = {**run.ENV, "PYTHONPATH": str(tree)}
    out = subprocess.run([run.PY, "-c", DRAIN, str(tree), db, str(jobs), str(count), "limited" if limited else ""],
                         env=env, cwd=tree,
                         check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    if not Path(result["code"]).is_relative_to(tree):
        raise RuntimeError(f"a drain meant for {tree} ran the queuectl of {result['code']}")
    return result


def compare(trees: dict[str, Path], dbs: dict[str, str], jobs: int, count: int, rounds: int,
            limited: bool = False) -> dict:
    """Alternate `rounds` drains of each tree; return each one's rates and CPU per job, and the ratios."""
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for i in range(rounds):
        for name in (list(trees) if i % 2 == 0 else list(reversed(trees))):
            runs[name].append(drain(trees[name], dbs[name], jobs, count, limited))
    rate = {name: statistics.median(r["rate"] for r in rs) for name, rs in runs.items()}
    cpu = {name: statistics.median(r["cpu"] for r in rs) * 1e6 / jobs for name, rs in runs.items()}
    return {"rates": {n: [round(r["rate"], 1) for r in rs] for n, rs in runs.items()}, "rate": rate,
            "code": {n: sorted({r["code"] for r in rs}) for n, rs in runs.items()},
            "cpu_us_per_job": cpu, "rate_ratio": rate["this"] / rate["base"], "cpu_ratio": cpu["this"] / cpu["base"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the revision to compare this tree with (e.g. main, a commit)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-postgresql", action="store_true", help="SQLite only")
    parser.add_argument("--limited", action="store_true",
                        help="drain a queue with a concurrency and a rate limit in force that never bind")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results: dict = {"base": args.rev, "this": subprocess.run(
        ["git", "-C", str(run.REPO), "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()}
    with tempfile.TemporaryDirectory(prefix="queuectl-ab-") as tmp, \
            run.postgres_server(not args.no_postgresql) as (server, skipped):
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(run.REPO), "worktree", "add", "--quiet", "--detach", str(base), args.rev],
                       check=True)
        try:
            subprocess.run([run.PY, "-m", "compileall", "-q", str(base / "queuectl"), str(run.REPO / "queuectl")],
                           check=True)
            trees = {"base": base, "this": run.REPO}
            engines = {"sqlite": {name: str(Path(tmp) / f"{name}.db") for name in trees}}
            if server is not None:
                engines["postgresql"] = {name: server.create_database(f"ab_{name}") for name in trees}
            else:
                print(f"PostgreSQL skipped: {skipped}", file=sys.stderr)
            for engine, dbs in engines.items():
                for count in args.counts:
                    r = results[f"{engine} --count {count}"] = compare(trees, dbs, args.jobs, count, args.rounds, args.limited)
                    print(f"{engine:10} --count {count}: {r['rate']['this']:.0f} vs {r['rate']['base']:.0f} jobs/s"
                          f" = {r['rate_ratio']:.2f}x the rate; CPU {r['cpu_us_per_job']['this']:.0f} vs"
                          f" {r['cpu_us_per_job']['base']:.0f} us/job = {r['cpu_ratio']:.2f}x", flush=True)
        finally:
            subprocess.run(["git", "-C", str(run.REPO), "worktree", "remove", "--force", str(base)], check=False)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
