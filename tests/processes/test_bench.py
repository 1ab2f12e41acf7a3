"""The benchmark runs end to end at tiny sizes (so it cannot rot); it reports, it does not gate."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.pgserver import PgServer


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)  # its run may take 300 s
def test_benchmark_smoke_run_reports_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    no_postgres = os.environ.get("QUEUECTL_TEST_POSTGRES") == "skip"  # as the PostgreSQL tests skip
    r = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--smoke", "--json", str(out),
                        *(["--no-postgresql"] if no_postgres else [])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    results = json.loads(out.read_text())
    for key in ("spawn_per_s", "drain_per_s", "drain_ratio", "pickup", "enqueue", "enqueue_file", "scale"):
        assert key in results, key
    assert all(v > 0 for v in results["drain_per_s"].values())
    assert results["pickup"]["p50_ms"] >= 0 and results["enqueue"]["ratio"] > 0
    assert "drain --count 2" in r.stdout and "pickup latency" in r.stdout
    check_viewed(results["viewed"], results["sizes"])
    assert "drain with 5 top viewers at 1 s" in r.stdout
    check_dashboard(results["dashboard"], results["sizes"], r.stdout, "")

    pg = results["postgresql"]
    why = "--no-postgresql given" if no_postgres else PgServer.missing()
    rows = check_breakdown(results["breakdown"], r.stdout, results["sizes"]["drain"])
    assert [(row["engine"], row["count"]) for row in rows if row["engine"] == "sqlite"] == [("sqlite", 1), ("sqlite", 2)]
    if why is not None:
        assert [row for row in rows if row["engine"] != "sqlite"] == []
        assert pg == {"skipped": why}
        assert f"PostgreSQL figures skipped: {why}" in r.stdout.splitlines()
        return
    assert "skipped" not in pg, pg
    assert pg["psycopg"]["impl"] in ("python", "binary", "c") and pg["psycopg"]["version"]
    # One pair of PostgreSQL rows per psycopg implementation that imports here, each run under PSYCOPG_IMPL.
    here = ["python", *(impl for impl in ("binary", "c") if importlib.util.find_spec(f"psycopg_{impl}"))]
    assert [(row["impl"], row["count"]) for row in rows if row["engine"] == "postgresql"] == [
        (impl, c) for impl in here for c in (1, 2)]
    assert sorted(results["breakdown"]["psycopg_missing"]) == sorted({"python", "binary", "c"} - set(here))
    server = pg["server"]
    assert (server["fsync"], server["synchronous_commit"], server["full_page_writes"]) == ("on", "on", "on")
    assert all(v > 0 for v in pg["drain_per_s"].values())
    assert all(v > 0 for v in pg["drain_ratio"].values()) and all(v > 0 for v in pg["drain_vs_sqlite"].values())
    assert 0 <= pg["pickup"]["p50_ms"] <= pg["pickup"]["p95_ms"]
    assert pg["pickup"]["poll_interval_s"] == results["pickup"]["poll_interval_s"] >= 1.0  # the wake-up, not a poll
    assert pg["enqueue_file"]["cli_rows_per_s"] > 0 and pg["enqueue_file"]["vs_sqlite"] > 0
    scale = pg["scale"]
    assert scale["stored_completed"] == results["scale"]["stored_completed"]
    assert min(scale["drain_ratio"], scale["status_ratio"], scale["list_ratio"], scale["status_vs_sqlite"]) > 0
    check_viewed(pg["viewed"], results["sizes"])
    check_dashboard(pg["dashboard"], results["sizes"], r.stdout, "pg: ")
    for line in ("pg: drain --count 2", "pg: pickup latency", "pg: enqueue --file", "pg: status / list",
                 "pg: drain with 5 top viewers"):
        assert line in r.stdout, line


def check_viewed(viewed: dict, sizes: dict) -> None:
    """The viewers' figure: both sides drained the jobs, and the ratio is theirs."""
    assert (viewed["viewers"], viewed["interval_s"], viewed["jobs"]) == (5, 1.0, sizes["viewed"])
    assert viewed["with_per_s"] > 0 and viewed["without_per_s"] > 0
    assert viewed["ratio"] == pytest.approx(viewed["with_per_s"] / viewed["without_per_s"])


def check_dashboard(d: dict, sizes: dict, stdout: str, engine: str) -> None:
    """The dashboard's figures (bench/dashboard.py): every page timed and reported, and the tabs' polling read the
    queue's snapshot at most once an interval (the shared snapshot's rule, not a timing), the history once a span."""
    assert d["stored"] == sizes["stored"] and d["requests"] == sizes["web_requests"] and d["target_ms"] == 300
    assert list(d["pages"]) == ["overview", "live part", "jobs", "dead jobs", "a job", "queues"]
    for name, page in d["pages"].items():
        assert 0 < page["p50_ms"] <= page["p95_ms"] and page["first_ms"] > 0, (name, page)
        assert f"{engine}web {name} p50 / p95, {sizes['stored']:,} stored" in stdout, name
    load = d["load"]
    assert (load["clients"], load["interval_s"]) == (sizes["web_clients"], 3.0)
    assert load["requests"] == sizes["web_clients"] * int(sizes["web_poll_s"]) and load["seconds"] > 0  # one a second each
    assert 1 <= load["snapshot_reads"] <= load["snapshot_bound"] == int(load["seconds"] // 3.0) + 1, load
    assert load["page_reads"] <= 2 * load["snapshot_bound"], load  # the running and dead lists, read with it
    assert 3 <= load["history_reads"] <= 3 * (1 + int(load["seconds"] // 15)), load  # each span, kept 15 s or more
    assert f"{engine}web: {load['clients']} tabs polling the live part" in stdout


def check_breakdown(breakdown: dict, stdout: str, jobs: int) -> list[dict]:
    """The breakdown's rows: parts non-negative that add up to the total (to rounding), printed as a table."""
    assert breakdown["jobs"] == jobs and breakdown["rounds"] >= 1
    rows = breakdown["rows"]
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:7] == ["engine", "count", "spawn", "wait",
                                                                             "store", "rest", "total"])
    printed = lines[header + 1:header + 1 + len(rows)]
    for row, line in zip(rows, printed, strict=True):
        parts = [row[f"{part}_us"] for part in ("spawn", "wait", "store", "rest")]
        assert min(parts) >= 0, row
        assert abs(sum(parts) - row["total_us"]) <= 0.03, row  # four parts and the total, each to 0.01 µs
        assert row["total_us"] > 0 and row["ceiling_us"] > 0 and row["overhead"] > 0
        # One thread: its CPU time within the store's calls, and in all, is no more than their wall time.
        assert 0 <= row["store_cpu_us"] <= row["store_us"] + 0.01 and 0 < row["cpu_us"] <= row["total_us"] + 0.01, row
        # Where counted (n/a if the store's connection is not found); batched exchanges make fewer than 1 per job.
        stmts = row["statements_per_job"]
        assert stmts is None or stmts > 0, row
        engine = row["engine"] if row["impl"] is None else f"pg/{row['impl']}"
        cells = line.split()
        assert cells[:3] == [engine, str(row["count"]), f"{row['spawn_us']:.0f}"], line
        assert cells[7] == ("n/a" if stmts is None else f"{stmts:.1f}"), line
    return rows


def test_the_ab_drain_compares_this_tree_with_a_revision_and_leaves_no_worktree(tmp_path):
    """bench/ab.py at tiny sizes against HEAD: both trees drain, in alternating rounds, and the
    temporary worktree of the revision is removed after."""
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("bench/ab.py checks out a revision: this tree is not a git checkout")
    out = tmp_path / "ab.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "ab.py"), "HEAD", "--rounds", "2", "--jobs", "20",
                        "--counts", "1", "--no-postgresql", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    row = json.loads(out.read_text())["sqlite --count 1"]
    assert [len(row["rates"][tree]) for tree in ("base", "this")] == [2, 2]
    assert row["rate_ratio"] > 0 and row["cpu_ratio"] > 0
    # Each side's worker ran its own tree's code: the revision's from its temporary worktree.
    assert row["code"]["this"] == [str(REPO / "queuectl" / "__init__.py")]
    [base] = row["code"]["base"]
    assert "queuectl-ab-" in base and base.endswith("/base/queuectl/__init__.py")
    assert "sqlite     --count 1:" in r.stdout and "PostgreSQL skipped: --no-postgresql given" in r.stderr
    worktrees = subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True, text=True).stdout
    assert "queuectl-ab-" not in worktrees
