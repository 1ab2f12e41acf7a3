"""Clock steps: the wall clock of every queuectl process steps at once, the monotonic clock does not.

libfaketime (Debian's `faketime`) is preloaded into the workers, their jobs and the
`status` command, reading its offset from one file on every call
(FAKETIME_TIMESTAMP_FILE with FAKETIME_NO_CACHE), with monotonic clocks left real
(FAKETIME_DONT_FAKE_MONOTONIC), as a real step (NTP at boot, `date -s`) or a resume from
suspend leaves them. Steps: +1 h, -1 h, -1 h again (behind real time), +10 min (a
resume), and +10 min with every worker idle. Through all of them no live job is killed
or run twice, no live worker is declared dead, and retries come on time.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import time

import pytest

from support.cli import QUEUECTL, configure
from support.suite import require
from support.waiting import wait_for
from queuectl.domain.models import JobState
from queuectl.store.limits import RATE_SLACK

from .checks import integrity


BACKOFF_BASE = 2  # a retry after the n-th failure waits 2**n s


@pytest.fixture
def faketime(tmp_path):
    """Return (environment that preloads libfaketime, function that sets the offset in seconds)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    require(None if found else "libfaketime is missing (apt-get install faketime)", "chaos")
    rc = tmp_path / "faketime.rc"

    def set_offset(seconds: int) -> None:
        tmp = rc.with_suffix(".tmp")
        tmp.write_text(f"{seconds:+d}\n")
        os.replace(tmp, rc)  # atomic: a process never reads a half-written offset

    set_offset(0)
    env = {"LD_PRELOAD": found[0], "FAKETIME_TIMESTAMP_FILE": str(rc), "FAKETIME_NO_CACHE": "1",
           "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    return env, set_offset


def test_clock_steps(db, run_cli, store, workers, tmp_path, faketime, figures):
    env, set_offset = faketime
    configure(run_cli, ("heartbeat-interval", "0.2"), ("stale-after", "1.5"), ("poll-interval", "0.05"),
              ("backoff-base", str(BACKOFF_BASE)), ("max-retries", "5"))
    runs = tmp_path / "runs"
    probe = subprocess.run(["date", "+%s"], env={**os.environ, **env}, capture_output=True, text=True)
    set_offset(3600)
    stepped = subprocess.run(["date", "+%s"], env={**os.environ, **env}, capture_output=True, text=True)
    set_offset(0)
    assert abs(int(stepped.stdout) - int(probe.stdout) - 3600) <= 2, "libfaketime does not step the clock"

    procs = [workers.start("--name", f"w{n}", "--count", "3", env=env) for n in range(2)]
    wait_for(lambda: len(store.workers()) == 2, message="both workers to register")

    def long_job(job_id: str, seconds: float) -> None:
        run_cli("enqueue", json.dumps({"id": job_id, "command": f"echo {job_id} >> {runs}; sleep {seconds}"}))

    def attempts_of(job_id: str, state: JobState):
        return lambda: store.get_job(job_id).state == state and store.get_job(job_id).attempts

    for i in range(4):
        long_job(f"long{i}", 8)
    run_cli("enqueue", json.dumps({"id": "flaky", "command": '[ "$QUEUECTL_ATTEMPT" -ge 3 ]'}))
    wait_for(lambda: store.counts()["default"].get("processing", 0) >= 4, message="the long jobs to run")

    # Step +1 h right after the flaky job's first failure: its retry must wait its 2 s, not run early.
    wait_for(lambda: attempts_of("flaky", JobState.FAILED)() == 1, message="the first failure")
    failed_at = time.monotonic()
    set_offset(3600)
    wait_for(lambda: store.get_job("flaky").attempts == 2, timeout=20, message="the second attempt")
    first_retry = time.monotonic() - failed_at

    # Step -1 h right after the second failure: its retry is due 4 s later, not an hour later.
    wait_for(lambda: attempts_of("flaky", JobState.FAILED)() == 2, message="the second failure")
    failed_at = time.monotonic()
    set_offset(0)
    wait_for(lambda: store.get_job("flaky").state == JobState.COMPLETED, timeout=30,
             message="the flaky job to complete after the backward step")
    second_retry = time.monotonic() - failed_at

    # Behind real time, then a resume: both while jobs run.
    for i in (4, 5):
        long_job(f"long{i}", 5)
    wait_for(lambda: store.get_job("long5").state == JobState.PROCESSING, message="the last long jobs to run")
    set_offset(-3600)
    time.sleep(2.0)  # more than stale-after: a wall-clock judge would recover everything now
    set_offset(-3000)
    wait_for(lambda: store.counts()["default"].get("completed", 0) == 7, timeout=60,
             message="every job to complete")

    # Idle workers: a step alone must not make either declare the other dead.
    set_offset(-2400)
    time.sleep(2.0)
    status = json.loads(subprocess.run([*QUEUECTL, "--db", db, "status", "--json"], env={**os.environ, **env},
                                       capture_output=True, text=True, check=True).stdout)
    alive = [p.poll() is None for p in procs]
    for p in procs:
        p.send_signal(signal.SIGTERM)
    codes = [p.wait(30) for p in procs]
    logs = "".join(workers.output(p) for p in procs)

    figures.add("steps (offset from real time)", "+1 h, then 0, -1 h, -50 min, -40 min idle")
    figures.add("retry after the 1st failure (due in 2 s), +1 h step", f"{first_retry:.2f} s")
    figures.add("retry after the 2nd failure (due in 4 s), -1 h step", f"{second_retry:.2f} s")
    figures.add("steps the workers logged", logs.count("the wall clock stepped"))
    figures.add("status after the idle step", [(w["name"], w["state"], w["heartbeat_age"]) for w in status["workers"]])

    assert alive == [True, True] and codes == [0, 0], logs
    assert "recovered" not in logs and "declared dead" not in logs, logs
    assert sorted(runs.read_text().split()) == sorted(f"long{i}" for i in range(6))  # each ran exactly once
    for i in range(6):
        job = store.get_job(f"long{i}")
        assert (job.state, job.attempts, job.last_error) == (JobState.COMPLETED, 1, None), job
    flaky = store.get_job("flaky")
    assert (flaky.state, flaky.attempts) == (JobState.COMPLETED, 3)
    assert BACKOFF_BASE ** 1 - 0.3 <= first_retry <= BACKOFF_BASE ** 1 + 3  # on time: not early, not late
    assert BACKOFF_BASE ** 2 - 0.3 <= second_retry <= BACKOFF_BASE ** 2 + 3
    assert [w["state"] for w in status["workers"]] == ["running", "running"]
    assert all(w["heartbeat_age"] < 1.5 for w in status["workers"]), status["workers"]
    assert logs.count("the wall clock stepped") >= 2 * 4  # each worker saw each step
    assert integrity(db) == "ok"


def test_a_rate_limit_holds_through_wall_clock_steps(db, run_cli, store, workers, tmp_path, faketime, figures):
    """`--rate 2/5s`, one `--count 2` worker whose wall clock steps +1 h after the fourth start, then -1 h after
    the sixth (issue 25): no 5 s holds more than 2 starts, and the queue goes on within one window of the step
    back. Starts are read by the jobs from /proc/uptime (CLOCK_BOOTTIME, which no step moves), as is the test's
    clock."""
    env, set_offset = faketime
    configure(run_cli, ("heartbeat-interval", "0.2"), ("stale-after", "1.5"), ("poll-interval", "0.05"))
    starts_file = tmp_path / "starts"
    starts_file.touch()
    assert run_cli("limit", "rq", "--rate", "2/5s").exit_code == 0
    for i in range(8):
        run_cli("enqueue", json.dumps({"id": f"rq{i}", "queue": "rq",
                                       "command": f"read up _ < /proc/uptime; echo $up >> {starts_file}; sleep 0.1"}))

    def uptime() -> float:
        return time.clock_gettime(time.CLOCK_BOOTTIME)

    def starts() -> list[float]:
        return [float(line) for line in starts_file.read_text().split()]

    proc = workers.start("--name", "w", "--count", "2", env=env)
    wait_for(lambda: len(starts()) >= 4, timeout=20, message="four starts")
    set_offset(3600)
    forward_at = uptime()
    wait_for(lambda: len(starts()) >= 6, timeout=20, message="six starts, after the step forward")
    assert busiest_window(starts()) <= 2, f"a burst after the step forward: {starts()}"
    set_offset(0)
    back_at = uptime()
    wait_for(lambda: len(starts()) >= 8, timeout=20, message="the queue to go on after the step back")
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(30)
    got = sorted(starts())

    busiest = busiest_window(got)
    resumed = min(u for u in got if u > back_at) - back_at
    figures.add("starts (s after the first)", [round(u - got[0], 2) for u in got])
    figures.add("steps (s after the first start)", f"+1 h at {forward_at - got[0]:.2f}, -1 h at {back_at - got[0]:.2f}")
    figures.add("most starts in any 5 s", busiest)
    figures.add("first start after the step back", f"{resumed:.2f} s")

    assert code == 0, workers.output(proc)
    assert len(got) == 8 and busiest <= 2, got
    assert resumed <= 5.0 + RATE_SLACK + 2.0, got  # one window (and the slack) at most, not the hour stepped
    assert integrity(db) == "ok"


def busiest_window(starts: list[float], window: float = 5.0) -> int:
    """The most of `starts` (seconds) that fall within any `window` seconds."""
    return max(sum(s <= u < s + window for u in starts) for s in starts)
