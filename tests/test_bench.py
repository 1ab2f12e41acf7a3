"""The benchmark runs end to end at tiny sizes (so it cannot rot); it reports, it does not gate."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[1]


def test_benchmark_smoke_run_reports_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--smoke", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    results = json.loads(out.read_text())
    for key in ("spawn_per_s", "drain_per_s", "drain_ratio", "pickup", "enqueue", "enqueue_file", "scale"):
        assert key in results, key
    assert all(v > 0 for v in results["drain_per_s"].values())
    assert results["pickup"]["p50_ms"] >= 0 and results["enqueue"]["ratio"] > 0
    assert "drain --count 2" in r.stdout and "pickup latency" in r.stdout
