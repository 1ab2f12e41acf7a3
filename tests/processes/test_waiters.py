"""Waiters in processes of their own, on SQLite and PostgreSQL: `wait` notices an end recorded
meanwhile; `enqueue --wait` exits as the command did, or 1 when the job is cancelled; Ctrl-C stops
`wait` and `worker stop` with 130 and one line, and stops only the waiting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from support.cli import QUEUECTL, configure, queuectl, shown, status
from queuectl.domain.models import JobState
from support.worker_steps import NOW, add, claim, ended, finish, ok, register
from support.engines import BOTH_ENGINES
from support.waiting import wait_for
from support.workers import WorkerProcs

pytestmark = BOTH_ENGINES


def test_a_waiter_in_another_process_returns_when_the_job_ends(db, run_cli, store, figures):
    add(store, id="done")
    ended(store, "done", ok)
    began = time.monotonic()
    assert subprocess.run([*QUEUECTL, "--db", db, "wait", "done"], timeout=60).returncode == 0
    one_read = time.monotonic() - began  # a waiter's start-up and first read, here and now
    add(store, id="later")
    waiter = subprocess.Popen([*QUEUECTL, "--db", db, "wait", "later"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        try:
            waiter.wait(2 * one_read)  # by then it has read the job pending at least once
        except subprocess.TimeoutExpired:
            pass
        assert waiter.poll() is None, waiter.communicate()  # a pending job: it waits
        w = register(store, "w")
        claim(store, w, [], 1, NOW)
        finish(store, w, [ok("later")], NOW)
        ended_at = time.monotonic()
        assert waiter.wait(30) == 0, waiter.communicate()
        figures.add("end recorded to waiter exited", f"{(time.monotonic() - ended_at) * 1000:.0f} ms")
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()


def _enqueue_wait(db: str, job: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*QUEUECTL, "--db", db, "enqueue", "--wait", json.dumps(job)], capture_output=True,
                          text=True, timeout=120, **kw)


def test_enqueue_wait_exits_as_the_command_did(db, run_cli, store, workers):
    configure(run_cli, ("max-retries", "0"), ("poll-interval", "0.1"))
    workers.start("--count", "2")
    done = _enqueue_wait(db, {"id": "fine", "command": "echo out"})  # no attempt failed: nothing on stderr
    assert (done.returncode, done.stdout, done.stderr) == (0, "fine\n", "")
    assert _enqueue_wait(db, {"id": "three", "command": "exit 3"}).returncode == 3
    assert _enqueue_wait(db, {"id": "slow", "command": "sleep 30", "timeout": 0.5}).returncode == 124
    assert _enqueue_wait(db, {"id": "missing", "command": "true", "cwd": "/no/such/dir"}).returncode == 1
    assert [store.get_job(j).state for j in ("fine", "three", "slow", "missing")] == [
        JobState.COMPLETED, JobState.DEAD, JobState.DEAD, JobState.DEAD]


@pytest.mark.parametrize("quiet", [False, True])
def test_enqueue_wait_and_wait_say_each_failed_attempt_on_stderr_and_stdout_stays_the_answer(db, run_cli, store,
                                                                                                workers, quiet):
    configure(run_cli, ("max-retries", "1"), ("poll-interval", "0.1"))  # backoff-base 2: a retry 2 s later
    workers.start()
    flag = ["--quiet"] if quiet else []
    enqueuer = subprocess.Popen([*QUEUECTL, "--db", db, "enqueue", "--wait", *flag, json.dumps(
        {"id": "flaky", "command": "echo oops >&2; exit 3"})], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    assert enqueuer.stdout.readline() == "flaky\n"  # enqueued: another waiter may come
    waiter = subprocess.Popen([*QUEUECTL, "--db", db, "wait", "--json", *flag, "flaky"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    rest, enqueue_err = enqueuer.communicate(timeout=60)
    out, err = waiter.communicate(timeout=60)
    lines = ["job flaky: attempt 1 of 2 failed (exit code 3): retry in 2 s",
             "job flaky: attempt 2 of 2 failed (exit code 3): dead"]
    assert (enqueuer.returncode, rest) == (3, "")
    assert enqueue_err.splitlines() == [*([] if quiet else lines), "job flaky dead: exit code 3"]
    assert waiter.returncode == 1 and [j["state"] for j in json.loads(out)] == ["dead"]  # stdout: the JSON alone
    # The waiter may have started after the job's first failure: it says that failure if it saw it waiting for
    # its retry (it came up within the 2 s), never a line twice.
    assert err.splitlines() == [*([] if quiet else lines), "job flaky dead: exit code 3"]


def test_enqueue_wait_of_a_cancelled_job_exits_1_and_ctrl_c_stops_only_the_waiting(db, run_cli, store):
    # No worker: the jobs stay pending until cancelled.
    waiter = subprocess.Popen([*QUEUECTL, "--db", db, "enqueue", "--wait", '{"id": "dropped", "command": "true"}'],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert waiter.stdout.readline() == "dropped\n"  # printed before the wait begins
    store.cancel(["dropped"], NOW)
    assert waiter.wait(30) == 1
    interrupted = subprocess.Popen([*QUEUECTL, "--db", db, "enqueue", "--wait", '{"id": "goes-on", "command": "true"}'],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert interrupted.stdout.readline() == "goes-on\n"
    interrupted.send_signal(signal.SIGINT)  # Ctrl+C
    assert interrupted.wait(30) == 130
    assert interrupted.stderr.read() == "queuectl: stopped waiting; the job goes on: queuectl wait goes-on\n"
    assert store.get_job("goes-on").state == JobState.PENDING


def _has_open(pid: int, path: str) -> bool:
    """True once process `pid` has the file `path` open (it is in the command, past its start-up)."""
    import os

    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == path for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_ctrl_c_stops_wait_and_worker_stop_with_130_and_one_line(tmp_path):
    """Ctrl+C: `wait` says how to wait again; another command (here `worker stop`, waiting for a drain)
    says it was interrupted; each exits 130 with one line on stderr, and what was done stays done.
    (The command line's handling, the same on both engines: on SQLite, whose open file shows when
    a process has reached its command.)"""
    db = str(tmp_path / "q.db")
    workers = WorkerProcs(db, tmp_path)
    try:
        _ctrl_c(db, workers)
    finally:
        workers.cleanup()


def _ctrl_c(db: str, workers) -> None:
    queuectl(db, "enqueue", '{"id":"long","command":"sleep 60"}')
    waiter = subprocess.Popen([*QUEUECTL, "--db", db, "wait", "long"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    wait_for(lambda: _has_open(waiter.pid, os.path.realpath(db)), message="wait to open the database")
    waiter.send_signal(signal.SIGINT)
    assert waiter.wait(30) == 130
    assert (waiter.stdout.read(), waiter.stderr.read()) == (
        "", "queuectl: stopped waiting; the jobs go on: queuectl wait long\n")
    workers.start("--name", "w1")
    wait_for(lambda: shown(db, "long")["state"] == "processing",
             message="the job to start")
    stopper = subprocess.Popen([*QUEUECTL, "--db", db, "worker", "stop", "--timeout", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: status(db)["workers"][0]["state"] == "draining",
             message="the worker to drain")
    stopper.send_signal(signal.SIGINT)
    assert stopper.wait(30) == 130
    err = stopper.stderr.read()
    assert err == "queuectl: error: interrupted: what was done before it stays done\n", err
    assert status(db)["workers"][0]["state"] == "draining"  # it goes on
