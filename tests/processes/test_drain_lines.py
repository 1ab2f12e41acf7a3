"""Saying what is happening while a command waits, with real workers, on SQLite and PostgreSQL: a drain
names the running jobs it waits for, in `worker stop` and in the worker's own log (the journal under
systemd); and `status` shows the workers that ended, with how (drained, forced)."""

from __future__ import annotations

import re
import subprocess

from support.cli import QUEUECTL, enqueue, status
from support.workers import WorkerProcs
from support.workers import configure_fast, safe_path, start_sleeping_job, until, wait_exit
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_a_drain_says_which_running_jobs_it_waits_for_in_worker_stop_and_in_the_workers_log(
        db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    release = safe_path(tmp_path / "release")  # the jobs run until the test says
    for job_id in ("j-41", "j-44"):
        enqueue(run_cli, id=job_id, command=f"touch {safe_path(tmp_path / job_id)}; until [ -e {release} ]; do"
                                            " sleep 0.05; done")
    w = workers.start("--name", "w", "--count", "2")
    until(lambda: (tmp_path / "j-41").exists() and (tmp_path / "j-44").exists(), "both jobs to start", procs=[w])
    stop = subprocess.Popen([*QUEUECTL, "--db", db, "worker", "stop"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = stop.stderr.readline()  # after 1 s of waiting
        assert re.fullmatch(r"waiting for 2 running jobs: j-4[14] \(\d+ s\), j-4[14] \(\d+ s\)\n", line), line
        assert sorted(re.findall(r"j-4[14]", line)) == ["j-41", "j-44"]
        until(lambda: "waiting for 2 running jobs: j-4" in WorkerProcs.output(w), "the worker to log its drain",
              procs=[w])
        (tmp_path / "release").touch()
        out, err = stop.communicate(timeout=60)
    finally:
        if stop.poll() is None:
            stop.kill()
            stop.communicate()
    assert (stop.returncode, out) == (0, f"w (pid {w.pid}): stopped\n")
    assert all(line.startswith("waiting for ") for line in err.splitlines()), err
    assert wait_exit(w) == 0
    log = WorkerProcs.output(w)
    assert re.search(r"INFO waiting for 2 running jobs: j-4[14] \(\d+ s\), j-4[14] \(\d+ s\)$", log, re.M), log
    report = status(db)
    assert report["workers"] == [] and [(s["name"], s["pid"], s["ended"]) for s in report["stopped_workers"]] == [
        ("w", w.pid, "drained")]


def test_a_worker_stopped_with_force_shows_so_in_status(db, run_cli, store, workers, tmp_path):
    w, _ = start_sleeping_job(run_cli, workers, tmp_path)
    stop = subprocess.run([*QUEUECTL, "--db", db, "worker", "stop", "--force"], capture_output=True, text=True,
                          timeout=60)
    assert (stop.returncode, stop.stdout) == (0, f"w (pid {w.pid}): stopped\n"), stop.stderr
    assert wait_exit(w) == 0
    assert [(s["name"], s["ended"]) for s in status(db)["stopped_workers"]] == [("w", "forced")]
