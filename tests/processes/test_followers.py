"""A follower (`logs --follow`, `enqueue --follow`) in a process of its own, on SQLite and PostgreSQL,
while a real worker runs the job: every line once, in order, within a second, across retries; its exit
as the job's; Ctrl-C stops the following, not the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from support.cli import QUEUECTL, configure
from queuectl.domain.models import JobState
from queuectl.store import open_store
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


TICKER = "for i in $(seq 20); do echo \"$i $(date +%s.%N)\"; echo \"e$i\" >&2; sleep 0.1; done"


def gated(go, command: str) -> str:
    """`command` after a line "ready" and a wait for the file `go`: the test makes it once the follower has
    printed that line, so that what is measured is following, not the follower's start."""
    return f"echo ready; while [ ! -e {go} ]; do sleep 0.02; done; {command}"


def _follower(db: str, *args: str) -> subprocess.Popen:
    # Its own process, that shares nothing with the worker but the database (on PostgreSQL, a URI).
    return subprocess.Popen([*QUEUECTL, "--db", db, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_follower_gets_every_line_once_in_order_within_a_second(db, run_cli, workers, figures, tmp_path):
    run_cli("enqueue", json.dumps({"id": "tick", "command": gated(tmp_path / "go", TICKER)}))
    follower = _follower(db, "logs", "-f", "tick")
    workers.start()
    assert follower.stdout.readline() == b"ready\n"
    (tmp_path / "go").touch()
    arrivals = []
    for raw in follower.stdout:
        arrivals.append((raw.decode(), time.time()))
    err = follower.stderr.read().decode()
    assert follower.wait(30) == 0, err
    lines = [text.split() for text, _ in arrivals]
    assert [int(n) for n, _ in lines] == list(range(1, 21)), arrivals
    assert err.splitlines() == [f"e{i}" for i in range(1, 21)]
    delays = [seen - float(written) for (_, written), (_, seen) in zip(lines, arrivals)]
    figures.add("line written to line printed, max", f"{max(delays) * 1000:.0f} ms")
    figures.add("line written to line printed, mean", f"{sum(delays) / len(delays) * 1000:.0f} ms")
    assert max(delays) < 1.0, delays
    job = open_store(db).get_job("tick", output=True)
    assert job.stdout == b"ready\n" + b"".join(text.encode() for text, _ in arrivals)  # the stored output, as before


def test_a_follower_goes_on_across_a_retry(db, run_cli, workers, tmp_path):
    marker, go = tmp_path / "tried", tmp_path / "go"
    # The first attempt waits for `go` (made once the follower has shown its first line): then fails.
    command = (f"echo try; if [ ! -e {marker} ]; then touch {marker}; while [ ! -e {go} ]; do sleep 0.02; done;"
               " echo bad >&2; exit 3; fi; echo fine")
    configure(run_cli, ("backoff-base", "1.1"))
    run_cli("enqueue", json.dumps({"id": "flaky", "command": command, "max_retries": 2}))
    follower = _follower(db, "logs", "--follow", "flaky")
    workers.start()
    assert follower.stdout.readline() == b"try\n"
    go.touch()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert out.decode() == "try\nfine\n"
    assert err.decode().splitlines() == ["bad", "queuectl: attempt 1 ended (exit code 3); following attempt 2"]


def test_enqueue_follow_exits_as_the_job_did(db, workers):
    workers.start()
    r = subprocess.run([*QUEUECTL, "--db", db, "enqueue", "--follow", '{"id": "j", "command": "echo hi; exit 3",'
                        ' "max_retries": 0}'], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (3, "j\nhi\n"), r.stderr
    r = subprocess.run([*QUEUECTL, "--db", db, "enqueue", "--follow", '{"command": "echo ok"}'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.endswith("\nok\n"), r.stderr


def test_ctrl_c_stops_enqueue_follow_and_the_job_goes_on(db, store):
    following = subprocess.Popen([*QUEUECTL, "--db", db, "enqueue", "--follow", '{"id": "on", "command": "true"}'],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert following.stdout.readline() == "on\n"  # the job is in; no worker runs it
    following.send_signal(signal.SIGINT)  # Ctrl+C
    assert following.wait(30) == 130
    assert following.stderr.read() == "queuectl: stopped following; the job goes on: queuectl logs -f on\n"
    assert store.get_job("on").state == JobState.PENDING
