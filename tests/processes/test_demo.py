"""`make demo` (demo/demo.sh) as the README tells it: it runs in a fresh directory and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "demo" / "demo.sh"


def test_the_demo_shows_the_retries_the_dead_letter_queue_and_the_results(tmp_path):
    """The README's promise: a job retried twice with backoff then dead, one that overruns its timeout, the
    dead letter queue, and the compressed files checked."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("QUEUECTL_DB", None)
    r = subprocess.run(["sh", str(DEMO)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    for line in ("job fetch-mirror: retry 1/2 in 2 s (exit code 2)", "job fetch-mirror: retry 2/2 in 4 s",
                 "job fetch-mirror: dead: exit code 2 (attempt 3 of 3)", "job slow-report: dead: timed out after 2 s",
                 "checksums: all OK"):
        assert line in r.stdout, (line, r.stdout)
    dlq = r.stdout.split("== queuectl dlq list", 1)[1]
    assert "fetch-mirror" in dlq and "slow-report" in dlq
    assert (tmp_path / "demo-work" / "data").is_dir()  # everything under the directory it ran in
