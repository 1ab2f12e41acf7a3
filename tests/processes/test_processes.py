"""Tier 2: real `queuectl worker start` processes against one SQLite file or PostgreSQL database. No mocks.

Every test runs on both engines (the `db` fixture below).

Settings are made short through the CLI (in-process Click runner, same database) so the
whole module runs in about a minute. The tests wait on conditions (`wait_for`), never
on fixed sleeps for correctness; the few short sleeps only pace signals that are re-sent
if they turned out to be too close together. Polling reads the database through the
store (cheap); commands whose output is asserted run as real processes (`queuectl`).

The container's PID 1 does not reap orphans, so a killed orphan stays a zombie: the
helpers count a zombie as gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from support.cli import QUEUECTL, enqueue, queuectl, status
from support.waiting import wait_for
from support.workers import (WorkerProcs, configure_fast, read_pid, safe_path, start_sleeping_job, state_is, until,
                             wait_exit, worker_logs)
from queuectl.domain.models import JobState
from queuectl.store import is_uri
from support.worker_steps import claim
from support.procstat import gone, live_members
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


PY = sys.executable


# -- helpers --------------------------------------------------------------------------------------


def logs_bytes(db: str, job_id: str) -> subprocess.CompletedProcess:
    """`queuectl logs ID` as a process, with its stdout and stderr as raw bytes."""
    r = subprocess.run([*QUEUECTL, "--db", db, "logs", job_id], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r


def start_slow_first_attempt(run_cli, store, workers, tmp_path, job_id: str, name: str):
    """Enqueue a job whose first attempt sleeps 30 s (later ones end at once); start a worker on it.

    Return (worker process, the job's pgid) once the job's process group is recorded.
    """
    d = safe_path(tmp_path)
    enqueue(run_cli, id=job_id, command=(
        f'echo $$ > {d}/pid.$QUEUECTL_ATTEMPT; if [ "$QUEUECTL_ATTEMPT" = 1 ]; then sleep 30; fi'))
    worker = workers.start("--name", name)
    pgid = until(lambda: read_pid(tmp_path / "pid.1"), "the first attempt to start", procs=[worker])
    until(lambda: store.get_job(job_id).pgid == pgid, "the job's process group to be recorded", procs=[worker])
    return worker, pgid


# -- 1. many workers, many jobs -------------------------------------------------------------------


def test_three_workers_run_300_jobs_exactly_once(db, run_cli, workers, tmp_path):
    configure_fast(run_cli)
    out = safe_path(tmp_path / "out.txt")
    ids = [f"j{i:03d}" for i in range(300)]
    lines = "\n".join(json.dumps({"id": i, "command": f"echo {i} >> {out}"}) for i in ids)
    r = run_cli("enqueue", "--file", "-", input=lines)
    assert r.exit_code == 0, r.stderr

    procs = [workers.start("--count", "2", "--burst", "--name", f"w{n}") for n in range(3)]
    for p in procs:
        assert wait_exit(p, 90) == 0, worker_logs([p])

    written = (tmp_path / "out.txt").read_text().split()
    counts = Counter(written)
    assert set(counts) == set(ids)
    assert [i for i, n in counts.items() if n != 1] == []  # every job ran exactly once
    s = status(db)
    assert s["jobs"] == {"pending": 0, "processing": 0, "completed": 300, "failed": 0, "dead": 0, "cancelled": 0,
                         "blocked": 0}
    assert s["workers"] == []
    # Each completion is reported by exactly one worker, and the work was shared.
    done = [re.findall(r"job (\S+) completed", WorkerProcs.output(p)) for p in procs]
    assert sorted(sum(done, [])) == ids
    assert sum(1 for d in done if d) >= 2, [len(d) for d in done]


# -- 2. a killed worker's job is recovered at once; a silent one's after stale-after -------------------


def test_killed_worker_job_recovered_at_once_by_a_local_peer(db, run_cli, store, workers, tmp_path):
    # stale-after 60 s: the recovery below must not wait for it. backoff-max 0: the recovered
    # job is retried at once.
    configure_fast(run_cli, ("stale-after", "60"), ("backoff-max", "0"))
    d = safe_path(tmp_path)
    command = (
        f'echo $$ > {d}/pid.$QUEUECTL_ATTEMPT; '
        f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then sleep 30; echo finished > {d}/first; '
        f'else {PY} -m queuectl --db {db} show "$QUEUECTL_JOB_ID" --json > {d}/snapshot.json; fi'
    )
    enqueue(run_cli, id="victim", command=command)
    a = workers.start("--name", "a")
    pgid = until(lambda: read_pid(tmp_path / "pid.1"), "the first attempt to start", procs=[a])
    until(lambda: store.get_job("victim").pgid == pgid, "the job's process group to be recorded", procs=[a])
    until(lambda: len(live_members(pgid)) >= 2, "the shell and its sleep child", procs=[a])

    b = workers.start("--name", "b")
    until(lambda: store.worker_by_name("b"), "worker b to register", procs=[b])
    killed = time.monotonic()
    os.kill(a.pid, signal.SIGKILL)
    a.wait()
    until(state_is(store, "victim", JobState.COMPLETED), "the recovered job to complete", procs=[b])
    assert time.monotonic() - killed < 10  # a heartbeat of b's (0.2 s), not stale-after (60 s)
    job = store.get_job("victim")
    assert job.attempts == 2 and job.exit_code == 0
    snapshot = json.loads((tmp_path / "snapshot.json").read_text())  # taken by the second attempt
    assert snapshot["state"] == "processing"
    assert snapshot["attempts"] == 2
    assert snapshot["last_error"] == "worker lost"
    # The orphaned first attempt (shell and sleep) was killed, not left to finish.
    until(lambda: not live_members(pgid), "the orphaned process group to be gone", timeout=10)
    assert gone(pgid)
    assert not (tmp_path / "first").exists()
    log = WorkerProcs.output(b)
    assert "recovered job victim from dead worker 'a' (worker lost): retry scheduled" in log, log
    assert store.worker_by_name("a") is None
    b.send_signal(signal.SIGTERM)
    assert wait_exit(b) == 0


def test_burst_recovers_and_runs_a_killed_workers_job(db, run_cli, store, workers, tmp_path):
    # The case: kill -9 a worker mid-job, then `worker start --burst`. It must not
    # exit at once leaving the job processing and its orphan running owned by nobody.
    configure_fast(run_cli, ("stale-after", "60"), ("backoff-max", "0"))
    a, pgid = start_slow_first_attempt(run_cli, store, workers, tmp_path, "orphaned", "a")
    os.kill(a.pid, signal.SIGKILL)
    a.wait()
    r = queuectl(db, "worker", "start", "--burst", timeout=30)
    assert "recovered job orphaned from dead worker 'a' (worker lost)" in r.stderr, r.stderr
    job = store.get_job("orphaned")
    assert (job.state, job.attempts, job.exit_code) == (JobState.COMPLETED, 2, 0)
    until(lambda: not live_members(pgid), "the orphaned process group to be gone", timeout=10)
    assert status(db)["workers"] == []


@pytest.mark.parametrize("max_retries", [0, 2])
def test_a_job_that_kills_its_worker_at_once_runs_max_retries_plus_one_times(db, run_cli, store, tmp_path,
                                                                             max_retries):
    # Killed within a millisecond of its start, before a lazy start record: every loss counts the
    # attempt, and the last attempt's start is recorded before it runs (queuectl.domain.backoff.last_attempt).
    configure_fast(run_cli, ("backoff-max", "0"))
    ran = tmp_path / "ran"
    enqueue(run_cli, id="poison", command=f"echo x >> {safe_path(ran)}; kill -9 $PPID", max_retries=max_retries)
    killed = 0
    while True:  # each worker of the name first recovers what the killed one left
        r = queuectl(db, "worker", "start", "--burst", "--name", "victim", check=False, timeout=30)
        if r.returncode == 0:
            break
        assert r.returncode == -signal.SIGKILL and killed <= max_retries, (killed, r.stderr)
        killed += 1
    job = store.get_job("poison")
    assert (job.state, job.attempts, job.last_error) == (JobState.DEAD, max_retries + 1, "worker lost"), job
    assert (killed, ran.read_text().count("x")) == (max_retries + 1, max_retries + 1)


def test_a_silent_worker_of_another_host_is_recovered_after_stale_after_of_watching(
        db, run_cli, store, workers, tmp_path):
    # Two registrations from "another host" that this host cannot check by pid: one beats
    # (with a wall clock an hour behind ours), one has gone silent. Only the silent one's job
    # is recovered, and only once the local worker has watched it for stale-after (1.5 s).
    configure_fast(run_cli, ("backoff-max", "0"))
    enqueue(run_cli, id="far-live", command="true")
    enqueue(run_cli, id="far-dead", command="true")
    far = {"host": "elsewhere", "boot_id": "other-boot 1", "pid": 1, "pid_start": 1, "slots": 1, "queues": []}
    live_id, _ = store.register_worker({**far, "name": "far-live"}, time.time() - 3600)
    claim(store, live_id, [], 1, time.time())
    dead_id, _ = store.register_worker({**far, "name": "far-dead"}, time.time() - 3600)
    claim(store, dead_id, [], 1, time.time())
    assert {store.get_job(j).state for j in ("far-live", "far-dead")} == {JobState.PROCESSING}

    w = workers.start("--name", "local")
    until(lambda: store.worker_by_name("local"), "the local worker to register", procs=[w])
    started = time.monotonic()
    while store.get_job("far-dead").state == JobState.PROCESSING:
        store.heartbeat(live_id, time.time() - 3600)
        assert time.monotonic() - started < 30, worker_logs([w])
        time.sleep(0.1)
    assert time.monotonic() - started >= 1.2  # watched for stale-after, not judged on the wall clock
    until(state_is(store, "far-dead", JobState.COMPLETED), "the recovered job to run", procs=[w])
    for _ in range(30):  # 3 s more: the beating worker keeps its job
        store.heartbeat(live_id, time.time() - 3600)
        time.sleep(0.1)
    assert store.get_job("far-live").state == JobState.PROCESSING
    assert store.worker_by_name("far-live") is not None and store.worker_by_name("far-dead") is None
    assert "recovered job far-dead from stale worker 'far-dead'" in WorkerProcs.output(w)
    w.send_signal(signal.SIGTERM)
    assert wait_exit(w) == 0


def logged_by(procs, line: str) -> list:
    """The worker processes among `procs` whose output so far has `line`."""
    return [p for p in procs if line in WorkerProcs.output(p)]


def test_stale_workers_are_recovered_by_one_lease_holder_and_another_takes_over(db, run_cli, store, workers):
    configure_fast(run_cli, ("backoff-max", "0"))  # stale-after 1.5 s
    far = {"host": "elsewhere", "boot_id": "other-boot 1", "pid": 1, "pid_start": 1, "slots": 1, "queues": []}

    def silent_far_worker(name):  # its job is in a queue that the local workers do not serve
        enqueue(run_cli, id=f"job-of-{name}", command="true", queue=name)
        wid, _ = store.register_worker({**far, "name": name}, time.time())
        assert [j.id for j in claim(store, wid, [name], 1, time.time())] == [f"job-of-{name}"]

    def held_the_lease(name, job_id):
        """Whether worker `name` held the recovery lease when it recovered `job_id`: at that time (the job's
        updated_at, the sweep's `now`) a holder that is no worker is refused the lease, so a worker held it,
        and `name` may take it, so that worker was `name` (take_lease, its time passed in; the lease each
        probe may take lasts no time at all)."""
        at = store.get_job(job_id).updated_at
        return (not store.take_lease("recovery", -1, at, 0)
                and store.take_lease("recovery", store.worker_by_name(name).id, at, 0))

    def recovered(job_id):
        return lambda: store.get_job(job_id).last_error == "worker lost"

    procs = [workers.start("--name", f"local{n}", "--queue", "default") for n in range(3)]
    until(lambda: all(store.worker_by_name(f"local{n}") for n in range(3)), "the workers to register", procs=procs)
    silent_far_worker("far1")
    until(recovered("job-of-far1"), "far1's job to be recovered", procs=procs)
    # The recovery's log line follows its commit: wait for the line too, then count who wrote it.
    until(lambda: logged_by(procs, "recovered job job-of-far1"), "the recovery's log line", procs=procs)
    recovered_by = logged_by(procs, "recovered job job-of-far1")
    assert len(recovered_by) == 1, worker_logs(procs)  # one recovery, by the lease holder
    leader = recovered_by[0]
    names = {p: f"local{n}" for n, p in enumerate(procs)}
    assert held_the_lease(names[leader], "job-of-far1")
    leader.send_signal(signal.SIGTERM)
    assert wait_exit(leader) == 0
    silent_far_worker("far2")  # the lease's holder is gone: another worker takes it over
    until(recovered("job-of-far2"), "far2's job to be recovered", procs=procs)
    until(lambda: logged_by(procs, "recovered job job-of-far2"), "the recovery's log line", procs=procs)
    [second] = logged_by(procs, "recovered job job-of-far2")
    assert second is not leader and held_the_lease(names[second], "job-of-far2")
    for p in procs:
        if p is not leader:
            p.send_signal(signal.SIGTERM)
            assert wait_exit(p) == 0


def test_frozen_worker_is_declared_dead_and_exits_1(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli, ("backoff-max", "0"))  # stale-after 1.5 s
    a, pgid = start_slow_first_attempt(run_cli, store, workers, tmp_path, "frozen", "a")
    b = workers.start("--name", "b")
    until(lambda: store.worker_by_name("b"), "worker b to register", procs=[b])

    os.kill(a.pid, signal.SIGSTOP)  # alive but silent: no heartbeat
    until(state_is(store, "frozen", JobState.COMPLETED), "b to recover and rerun the job", procs=[b])
    until(lambda: not live_members(pgid), "a's copy of the job to be killed", timeout=10)
    os.kill(a.pid, signal.SIGCONT)
    assert wait_exit(a) == 1, worker_logs([a])
    assert "declared dead" in WorkerProcs.output(a)
    job = store.get_job("frozen")  # a's late result did not overwrite the rerun's
    assert job.state == JobState.COMPLETED and job.attempts == 2 and job.exit_code == 0
    assert [w["name"] for w in status(db)["workers"]] == ["b"]
    b.send_signal(signal.SIGTERM)
    assert wait_exit(b) == 0


# -- 3. a live job longer than stale-after is not run twice ----------------------------------------


def test_live_long_job_is_never_run_twice(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)  # stale-after 1.5 s, the job runs 4 s
    a = workers.start("--name", "a")
    b = workers.start("--name", "b")
    until(lambda: store.worker_by_name("a") and store.worker_by_name("b"), "both workers to register", procs=[a, b])
    runs = safe_path(tmp_path / "runs")
    enqueue(run_cli, id="long", command=f"echo run >> {runs}; sleep 4")
    until(state_is(store, "long", JobState.COMPLETED), "the long job to complete", procs=[a, b])

    assert (tmp_path / "runs").read_text() == "run\n"
    job = store.get_job("long")
    assert job.attempts == 1 and job.exit_code == 0 and job.last_error is None
    assert a.poll() is None and b.poll() is None
    for p in (a, b):
        assert "recovered" not in WorkerProcs.output(p)
        p.send_signal(signal.SIGTERM)
    assert wait_exit(a) == 0 and wait_exit(b) == 0


# -- 4. one stop signal drains ------------------------------------------------------------------------


def _sigterm(proc):
    proc.send_signal(signal.SIGTERM)


def _sigint_group(proc):
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C in the worker's terminal does


@pytest.mark.parametrize("stop", [_sigterm, _sigint_group], ids=["sigterm", "sigint-to-group"])
def test_one_stop_signal_drains_running_job(db, run_cli, store, workers, tmp_path, stop):
    configure_fast(run_cli)
    started = safe_path(tmp_path / "started")
    enqueue(run_cli, id="first", command=f"echo started > {started}; sleep 1.5; echo done")
    w = workers.start("--name", "w")
    until(lambda: (tmp_path / "started").exists(), "the job to start", procs=[w])
    enqueue(run_cli, id="second", command="true")
    stop(w)
    assert wait_exit(w) == 0, worker_logs([w])

    job = store.get_job("first")
    assert job.state == JobState.COMPLETED and job.exit_code == 0 and job.attempts == 1
    assert logs_bytes(db, "first").stdout == b"done\n"  # ran to its end, not interrupted
    second = store.get_job("second")  # a draining worker claims nothing more
    assert second.state == JobState.PENDING and second.attempts == 0
    assert status(db)["workers"] == []


# -- 5. a second stop signal stops the job and gives it back -------------------------------------------


@pytest.mark.parametrize("stop", [_sigterm, _sigint_group], ids=["sigterm-twice", "sigint-twice"])
def test_second_stop_signal_requeues_running_job(db, run_cli, store, workers, tmp_path, stop):
    w, pgid = start_sleeping_job(run_cli, workers, tmp_path)
    until(lambda: store.get_job("j").pgid == pgid, "the job's process group to be recorded", procs=[w])

    stop(w)
    forced = False
    for _ in range(5):
        # Pace the signals: two that arrive before the handler runs count once. A signal
        # that was merged so is simply sent again.
        time.sleep(0.5)
        assert store.get_job("j").state == JobState.PROCESSING, "one signal must not stop the job"
        stop(w)
        try:
            wait_for(state_is(store, "j", JobState.PENDING), timeout=5, message="the job to be requeued")
        except AssertionError:
            continue
        forced = True
        break
    assert forced, worker_logs([w])
    assert wait_exit(w) == 0, worker_logs([w])

    job = store.get_job("j")
    assert job.state == JobState.PENDING
    assert job.attempts == 0  # the claim counted one, the requeue gave it back
    assert job.worker_id is None and job.pgid is None
    until(lambda: not live_members(pgid), "the job's process group to be gone", timeout=10)
    assert "second stop request" in WorkerProcs.output(w)
    assert status(db)["workers"] == []


@pytest.mark.parametrize("draining_first", [True, False], ids=["already-draining", "not-yet-draining"])
def test_worker_stop_force_requeues_the_running_jobs(db, run_cli, store, workers, tmp_path, draining_first):
    w, _ = start_sleeping_job(run_cli, workers, tmp_path)
    if draining_first:
        assert queuectl(db, "worker", "stop", "--timeout", "0.2", check=False).returncode == 1
        until(lambda: store.worker_by_name("w").draining_since is not None, "the drain to be recorded", procs=[w])
    r = queuectl(db, "worker", "stop", "--force", "--timeout", "20")
    assert r.stdout == f"w (pid {w.pid}): stopped\n"
    assert wait_exit(w) == 0
    job = store.get_job("j")
    assert (job.state, job.attempts) == (JobState.PENDING, 0)


def test_sighup_drains_like_sigterm(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    enqueue(run_cli, id="j", command=f"echo started > {safe_path(tmp_path / 'started')}; sleep 1; echo done")
    w = workers.start("--name", "w")
    until(lambda: (tmp_path / "started").exists(), "the job to start", procs=[w])
    w.send_signal(signal.SIGHUP)  # the terminal or ssh session went away
    assert wait_exit(w) == 0, worker_logs([w])
    assert store.get_job("j").state == JobState.COMPLETED
    assert logs_bytes(db, "j").stdout == b"done\n"


def test_status_tells_a_dead_worker_from_a_live_one(db, run_cli, store, workers):
    configure_fast(run_cli, ("stale-after", "60"))
    a = workers.start("--name", "a")
    b = workers.start("--name", "b")
    until(lambda: len(status(db)["workers"]) == 2, "both workers to register", procs=[a, b])
    os.kill(b.pid, signal.SIGSTOP)  # b would recover dead a at its next heartbeat
    a.kill()
    a.wait()
    states = {w["name"]: w["state"] for w in status(db)["workers"]}
    assert states == {"a": "dead", "b": "running"}
    os.kill(b.pid, signal.SIGCONT)
    until(lambda: [w["name"] for w in status(db)["workers"]] == ["b"], "b to recover dead a", procs=[b])
    b.send_signal(signal.SIGTERM)
    assert wait_exit(b) == 0


# -- 6. restarts ------------------------------------------------------------------------------------


def test_jobs_and_pending_retries_survive_worker_restart(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)  # backoff-base 1: retries 1 s apart
    d = safe_path(tmp_path)
    for i in range(5):
        enqueue(run_cli, id=f"early{i}", command=f"echo early{i} >> {d}/ran")
    enqueue(run_cli, id="flaky", command=f"test -e {d}/go", max_retries=10)
    enqueue(run_cli, id="doomed", command="exit 3", max_retries=3)

    a = workers.start("--name", "a")  # started only after the jobs were enqueued
    until(lambda: all(store.get_job(f"early{i}").state == JobState.COMPLETED for i in range(5))
          and store.get_job("flaky").state == JobState.FAILED
          and store.get_job("doomed").state == JobState.FAILED,
          "the first runs", procs=[a])
    a.send_signal(signal.SIGTERM)
    assert wait_exit(a) == 0
    # Both are waiting for a retry while no worker runs.
    flaky, doomed = store.get_job("flaky"), store.get_job("doomed")
    assert flaky.state == JobState.FAILED and flaky.last_error == "exit code 1"
    assert doomed.state == JobState.FAILED and 1 <= doomed.attempts <= 3

    for i in range(3):
        enqueue(run_cli, id=f"late{i}", command=f"echo late{i} >> {d}/ran")
    (tmp_path / "go").touch()
    b = workers.start("--name", "b", "--burst")
    assert wait_exit(b, 60) == 0, worker_logs([b])

    flaky = store.get_job("flaky")
    assert flaky.state == JobState.COMPLETED and flaky.attempts >= 2
    doomed = store.get_job("doomed")
    assert doomed.state == JobState.DEAD and doomed.attempts == 4 and doomed.last_error == "exit code 3"
    assert sorted((tmp_path / "ran").read_text().split()) == sorted(
        [f"early{i}" for i in range(5)] + [f"late{i}" for i in range(3)])
    assert status(db)["jobs"] == {"pending": 0, "processing": 0, "completed": 9, "failed": 0, "dead": 1, "cancelled": 0,
                                  "blocked": 0}


# -- 7. large output ------------------------------------------------------------------------------------


def test_ten_megabytes_of_output_keep_the_tail(db, run_cli, workers):
    configure_fast(run_cli, ("output-limit", "65536"))
    enqueue(run_cli, id="big", command=(
        "head -c 10000000 /dev/zero | tr '\\0' y >&2; "
        "head -c 10000000 /dev/zero | tr '\\0' x; printf END"))
    w = workers.start("--burst")
    assert wait_exit(w, 60) == 0, worker_logs([w])

    job = json.loads(queuectl(db, "show", "big", "--json").stdout)
    assert job["state"] == "completed" and job["exit_code"] == 0
    r = logs_bytes(db, "big")
    assert len(r.stdout) == 65536 and r.stdout == b"x" * 65533 + b"END"
    assert r.stderr == b"y" * 65536


# -- 8. output that is not UTF-8 ---------------------------------------------------------------------------


def test_non_utf8_output_is_kept_as_bytes(db, run_cli, workers):
    configure_fast(run_cli)
    enqueue(run_cli, id="bin", command="printf '\\377\\376abc'; printf '\\377err' >&2")
    w = workers.start("--burst")
    assert wait_exit(w) == 0, worker_logs([w])

    r = logs_bytes(db, "bin")
    assert r.stdout == b"\xff\xfeabc"
    assert r.stderr == b"\xfferr"
    shown = json.loads(queuectl(db, "show", "bin", "--json").stdout)
    assert shown["state"] == "completed" and shown["exit_code"] == 0
    logged = json.loads(queuectl(db, "logs", "bin", "--json").stdout)
    assert logged["stdout"] == "\ufffd\ufffdabc"
    assert logged["stderr"] == "\ufffderr"


# -- 9. timeouts ------------------------------------------------------------------------------------------


def test_timeout_kills_grandchild(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    pidfile = safe_path(tmp_path / "grandchild")
    enqueue(run_cli, id="slow", command=f"sh -c 'sleep 60 & echo $! > {pidfile}; wait'", timeout=1, max_retries=0)
    w = workers.start("--burst")
    assert wait_exit(w) == 0, worker_logs([w])

    job = store.get_job("slow")
    assert job.state == JobState.DEAD and job.attempts == 1
    assert job.last_error == "timed out after 1 s"
    grandchild = read_pid(tmp_path / "grandchild")
    assert grandchild is not None
    until(lambda: gone(grandchild), "the grandchild sleep to be gone", timeout=10)


# -- 10. worker stop --------------------------------------------------------------------------------------


def test_worker_stop_stops_every_local_worker(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    for q in ("qa", "qb"):
        enqueue(run_cli, id=q, queue=q, command=f"echo started > {safe_path(tmp_path / q)}; sleep 1.5")
    w1 = workers.start("--name", "w1", "--queue", "qa")
    w2 = workers.start("--name", "w2", "--queue", "qb")
    until(lambda: (tmp_path / "qa").exists() and (tmp_path / "qb").exists(), "both jobs to start", procs=[w1, w2])

    # This test process does not reap the workers while `worker stop` runs: an exited
    # worker that is still a zombie must count as stopped.
    r = queuectl(db, "worker", "stop")
    assert sorted(r.stdout.splitlines()) == [f"w1 (pid {w1.pid}): stopped", f"w2 (pid {w2.pid}): stopped"]
    assert wait_exit(w1) == 0 and wait_exit(w2) == 0
    for q in ("qa", "qb"):
        job = store.get_job(q)
        assert job.state == JobState.COMPLETED and job.exit_code == 0
    assert status(db)["workers"] == []


def test_worker_stop_by_name_unknown_name_and_timeout(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    enqueue(run_cli, id="short", queue="qa", command=f"echo started > {safe_path(tmp_path / 'a')}; sleep 1")
    release = safe_path(tmp_path / "release")  # the long job runs until the test says (no race with a slow machine)
    enqueue(run_cli, id="long", queue="qb",
            command=f"echo started > {safe_path(tmp_path / 'b')}; until [ -e {release} ]; do sleep 0.05; done")
    w1 = workers.start("--name", "w1", "--queue", "qa")
    w2 = workers.start("--name", "w2", "--queue", "qb")
    until(lambda: (tmp_path / "a").exists() and (tmp_path / "b").exists(), "both jobs to start", procs=[w1, w2])

    r = queuectl(db, "worker", "stop", "nosuch", check=False)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "nosuch" in r.stderr
    assert w1.poll() is None and w2.poll() is None

    r = queuectl(db, "worker", "stop", "w1")
    assert r.stdout == f"w1 (pid {w1.pid}): stopped\n"
    assert wait_exit(w1) == 0
    assert store.get_job("short").state == JobState.COMPLETED
    assert w2.poll() is None and store.get_job("long").state == JobState.PROCESSING

    r = queuectl(db, "worker", "stop", "--timeout", "0.5", check=False)
    assert r.returncode == 1
    assert r.stdout == f"w2 (pid {w2.pid}): timeout\n"
    assert "still draining after 0.5 s: w2" in r.stderr
    assert w2.poll() is None  # told to drain, still finishing its job
    until(lambda: store.worker_by_name("w2").draining_since is not None, "w2 to record its drain", procs=[w2])
    assert status(db)["workers"][0]["state"] == "draining"
    # Asking again only waits again: it must not be taken for the second, forcing, signal.
    r = queuectl(db, "worker", "stop", "--timeout", "0.5", check=False)
    assert r.returncode == 1 and w2.poll() is None
    assert store.get_job("long").state == JobState.PROCESSING
    assert "second stop request" not in WorkerProcs.output(w2)
    (tmp_path / "release").touch()
    assert wait_exit(w2) == 0
    job = store.get_job("long")
    assert job.state == JobState.COMPLETED and job.attempts == 1
    assert status(db)["workers"] == []


# -- 11. burst -------------------------------------------------------------------------------------------


def test_burst_waits_for_retries_but_not_delayed_jobs(db, run_cli, store, workers):
    configure_fast(run_cli)  # backoff-base 1: the retry comes 1 s later
    idle = workers.start("--burst")
    assert wait_exit(idle) == 0, worker_logs([idle])  # nothing to do: exits at once

    enqueue(run_cli, id="ok", command="true")
    enqueue(run_cli, id="doomed", command="exit 4", max_retries=1)
    enqueue(run_cli, id="later", command="true", delay=3600)
    w = workers.start("--burst")
    assert wait_exit(w, 60) == 0, worker_logs([w])

    assert store.get_job("ok").state == JobState.COMPLETED
    doomed = store.get_job("doomed")
    assert doomed.state == JobState.DEAD and doomed.attempts == 2 and doomed.last_error == "exit code 4"
    later = store.get_job("later")
    assert later.state == JobState.PENDING and later.attempts == 0


# -- 12. worker names ------------------------------------------------------------------------------------


def test_same_name_conflict_then_immediate_takeover(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli, ("stale-after", "60"), ("backoff-max", "0"))
    first, pgid = start_slow_first_attempt(run_cli, store, workers, tmp_path, "held", "same")

    second = workers.start("--name", "same")
    assert wait_exit(second) == 1
    out = WorkerProcs.output(second)
    assert out.count("\n") == 1 and out.startswith("queuectl: error: ") and "already running" in out, out
    assert first.poll() is None and store.get_job("held").state == JobState.PROCESSING

    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    started = time.monotonic()
    third = workers.start("--name", "same")
    until(state_is(store, "held", JobState.COMPLETED), "the new incarnation to recover and rerun the job",
          procs=[third])
    assert time.monotonic() - started < 30  # well before stale-after (60 s)
    job = store.get_job("held")
    assert job.attempts == 2 and job.exit_code == 0
    assert store.worker_by_name("same").pid == third.pid
    log = WorkerProcs.output(third)
    assert "recovered job held from its previous incarnation (worker lost)" in log, log
    until(lambda: not live_members(pgid), "the old job's process group to be gone", timeout=10)
    third.send_signal(signal.SIGTERM)
    assert wait_exit(third) == 0


# -- 13. job environment ---------------------------------------------------------------------------------


def test_job_environment_is_scrubbed(db, run_cli, workers, tmp_path):
    configure_fast(run_cli)
    enqueue(run_cli, id="envjob", command=f"env > {safe_path(tmp_path / 'env.txt')}")
    w = workers.start("--burst", env={
        "NOTIFY_SOCKET": str(tmp_path / "notify.sock"), "WATCHDOG_USEC": "30000000",
        "WATCHDOG_PID": str(os.getpid()), "QUEUECTL_TEST_MARKER": "kept",
    })
    assert wait_exit(w) == 0, worker_logs([w])

    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines() if "=" in line)
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        assert name not in env
    assert env["QUEUECTL_JOB_ID"] == "envjob"
    assert env["QUEUECTL_ATTEMPT"] == "1"
    assert env["QUEUECTL_QUEUE"] == "default"
    assert env["QUEUECTL_TEST_MARKER"] == "kept"  # the rest of the worker's environment is passed on


# -- wake-ups ------------------------------------------------------------------------------------------

#: Seconds a woken worker may take to act, from the command's exit: well under the 30 s it polls and
#: beats at in the test below, which is what it would take without the wake-up.
PROMPTLY = 5.0


def test_every_command_that_makes_work_wakes_an_idle_worker_at_once(db, run_cli, store, workers, tmp_path):
    # Polls and heartbeats 30 s apart (the loop claims at either, and looks for cancels at a heartbeat):
    # only the wake-up (SQLite's datagram, sent by the store after its commit; PostgreSQL's NOTIFY) makes
    # the worker act within PROMPTLY. Every command runs as a real process, as a user runs it.
    configure_fast(run_cli, ("stale-after", "90"), ("heartbeat-interval", "30"), ("poll-interval", "30"),
              ("max-retries", "0"))
    d = safe_path(tmp_path)
    w = workers.start("--name", "w", "--count", "1")
    until(lambda: store.worker_by_name("w"), "the worker to register", procs=[w])
    # Once a job's end is recorded the worker has claimed in the same transaction and found nothing:
    # from then on it is idle until a wake-up, its next poll or its next heartbeat.
    queuectl(db, "enqueue", '{"id":"warm","command":"true"}')
    until(state_is(store, "warm", JobState.COMPLETED), "the first job to run", procs=[w])

    def promptly(predicate, what: str, *command: str) -> subprocess.CompletedProcess:
        r = queuectl(db, *command)
        until(predicate, f"{what} within {PROMPTLY} s of `queuectl {' '.join(command)}`", timeout=PROMPTLY,
              procs=[w])
        return r

    def runs(job_id: str) -> int:
        path = tmp_path / f"{job_id}.runs"
        return len(path.read_text().splitlines()) if path.exists() else 0

    promptly(lambda: runs("a") == 1 and store.get_job("a").state == JobState.DEAD, "the job to run",
             "enqueue", json.dumps({"id": "a", "command": f"echo run >> {d}/a.runs; exit 1"}))
    promptly(lambda: runs("a") == 2 and store.get_job("a").state == JobState.DEAD, "the dead job to run again",
             "dlq", "retry", "a")
    queuectl(db, "enqueue", '{"id":"b","command":"true","delay":3600}')
    queuectl(db, "cancel", "b")  # pending: cancelled at once, nothing for a worker to do
    promptly(state_is(store, "b", JobState.COMPLETED), "the cancelled job to run", "retry", "b")
    queuectl(db, "pause", "q")
    queuectl(db, "enqueue", '{"id":"c","queue":"q","command":"true"}')
    promptly(state_is(store, "c", JobState.COMPLETED), "the paused queue's job to run", "resume", "q")
    promptly(state_is(store, "long", JobState.PROCESSING), "the job to start",
             "enqueue", '{"id":"long","command":"sleep 60"}')
    r = promptly(state_is(store, "long", JobState.CANCELLED), "the running job to be stopped",
                 "cancel", "long", "--wait", str(PROMPTLY))
    assert r.stdout == "long: stopped and cancelled\n", (r.stdout, r.stderr)
    assert (runs("a"), store.get_job("long").attempts) == (2, 1)
    w.send_signal(signal.SIGTERM)
    assert wait_exit(w) == 0


def test_verbose_logs_each_start_and_the_default_only_ends(db, run_cli):
    configure_fast(run_cli)
    enqueue(run_cli, id="quiet", command="true")
    default = queuectl(db, "worker", "start", "--burst")
    assert "job quiet completed" in default.stderr and "job quiet started" not in default.stderr
    enqueue(run_cli, id="loud", command="true")
    verbose = queuectl(db, "worker", "start", "--burst", "--verbose")
    assert "job loud started (attempt 1): true" in verbose.stderr and "job loud completed" in verbose.stderr


# -- cancel -----------------------------------------------------------------------------------------------


def test_cancel_stops_a_running_jobs_whole_group_within_a_second(db, run_cli, store, workers, tmp_path):
    # Heartbeats 30 s apart: only the wake-up (a datagram; PostgreSQL's NOTIFY) can make the worker act in time.
    configure_fast(run_cli, ("stale-after", "90"), ("heartbeat-interval", "30"))
    d = safe_path(tmp_path)
    enqueue(run_cli, id="long", command=f"sleep 30 & echo $! > {d}/child; echo started; sleep 30")
    w = workers.start("--name", "w")
    child = until(lambda: read_pid(tmp_path / "child"), "the job and its child to start", procs=[w])
    pgid = store.get_job("long").pgid or until(lambda: store.get_job("long").pgid, "the group to be recorded")
    started = time.monotonic()
    r = queuectl(db, "cancel", "long")
    took = time.monotonic() - started
    assert r.stdout == "long: stopped and cancelled\n", (r.stdout, r.stderr)
    assert took < 3, took  # a poke: well within a heartbeat's time, plus the command's own start
    until(lambda: not live_members(pgid), "the whole group to be gone", timeout=5)
    assert gone(child)
    job = store.get_job("long", output=True)
    assert (job.state, job.attempts, job.stdout) == (JobState.CANCELLED, 1, b"started\n")
    assert job.last_error == "killed by signal 15 (SIGTERM)"
    enqueue(run_cli, id="next", command="true")  # the worker keeps serving
    until(state_is(store, "next", JobState.COMPLETED), "the next job to run", procs=[w])
    time.sleep(0.5)
    assert store.get_job("long").state == JobState.CANCELLED and store.get_job("long").attempts == 1  # no retry
    assert "job long cancelled" in WorkerProcs.output(w)
    w.send_signal(signal.SIGTERM)
    assert wait_exit(w) == 0


def test_a_job_retried_after_a_cancel_is_stopped_by_the_next_cancel(db, run_cli, store, workers, tmp_path):
    """The worker that stopped a run for a cancel stops the job's next run too (after `retry`), on the same worker."""
    configure_fast(run_cli)
    runs = safe_path(tmp_path) + "/runs"
    enqueue(run_cli, id="again", command=f"echo run >> {runs}; sleep 30")
    w = workers.start("--name", "w")
    for n in (1, 2):
        until(lambda: os.path.exists(runs) and open(runs).read().count("run") == n, f"run {n} to start", procs=[w])
        r = queuectl(db, "cancel", "again", "--wait", "10")
        assert r.stdout == "again: stopped and cancelled\n", (n, r.stdout, r.stderr)
        assert store.get_job("again").state == JobState.CANCELLED
        if n == 1:
            assert queuectl(db, "retry", "again").stdout == "again: pending\n"
    assert WorkerProcs.output(w).count("job again: cancel requested, stopping its process group") == 2
    w.send_signal(signal.SIGTERM)
    assert wait_exit(w) == 0


def test_cancel_racing_the_jobs_own_end_gives_one_consistent_state(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    w = workers.start("--name", "w", "--count", "4")
    until(lambda: store.worker_by_name("w"), "the worker to register", procs=[w])
    finals = []
    for i in range(8):
        enqueue(run_cli, id=f"race{i}", command="sleep 0.3")
        until(state_is(store, f"race{i}", JobState.PROCESSING), "the job to start", procs=[w])
        time.sleep(0.15 + 0.03 * i)  # the cancel lands about when the job ends by itself
        r = queuectl(db, "cancel", f"race{i}", "--json", check=False)
        report = json.loads(r.stdout)[0]
        until(lambda: store.get_job(f"race{i}").state != JobState.PROCESSING, "the job to end", procs=[w])
        job = store.get_job(f"race{i}")
        assert job.state in (JobState.COMPLETED, JobState.CANCELLED) and job.attempts == 1
        assert report["state"] == job.state.value, (report, job)  # reported as it ended
        if r.returncode:  # it had ended before the cancel: an error, and one line saying so
            assert report["error"] and r.stderr.count("\n") == 1 and "is completed" in r.stderr
        finals.append(job.state)
    assert not store.has_work([], time.time())  # neither outcome left a retry behind
    w.send_signal(signal.SIGTERM)
    assert wait_exit(w) == 0


def test_a_cancel_request_survives_the_workers_death(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli, ("stale-after", "60"))
    a, pgid = start_slow_first_attempt(run_cli, store, workers, tmp_path, "doomed", "a")
    os.kill(a.pid, signal.SIGSTOP)  # it cannot act on the request
    r = queuectl(db, "cancel", "doomed", "--wait", "0")
    assert "cancel requested" in r.stdout
    os.kill(a.pid, signal.SIGKILL)
    a.wait()
    b = workers.start("--name", "b")
    until(state_is(store, "doomed", JobState.CANCELLED), "the recovery to finish the cancel", procs=[b])
    until(lambda: not live_members(pgid), "the orphaned group to be gone", timeout=10)
    time.sleep(0.5)
    job = store.get_job("doomed")
    assert (job.state, job.attempts) == (JobState.CANCELLED, 1)  # never retried
    assert "recovered job doomed from dead worker 'a' (worker lost): cancelled" in WorkerProcs.output(b)
    b.send_signal(signal.SIGTERM)
    assert wait_exit(b) == 0


# -- retention ----------------------------------------------------------------------------------------------


def test_retention_runs_while_workers_drain_and_purge_shrinks_the_file(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli, ("keep-completed", "1s"))
    lines = "\n".join(json.dumps({"id": f"r{i:04d}", "command": "head -c 20000 /dev/zero"}) for i in range(1500))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    procs = [workers.start("--name", f"w{n}", "--count", "2") for n in range(2)]
    until(lambda: sum(store.run_counts().get("default", {}).values()) == 1500, "every job to run", timeout=120,
          procs=procs)
    until(lambda: store.counts().get("default", {}).get("completed", 0) == 0, "retention to delete them all",
          timeout=90, procs=procs)  # a pass a minute, and at once while a batch was full
    logs = worker_logs(procs)
    assert "retention: deleted" in logs and "locked" not in logs, logs
    assert store.run_counts()["default"] == {"completed": 1500}  # nothing failed, nothing lost
    for p in procs:
        p.send_signal(signal.SIGTERM)
        assert wait_exit(p) == 0

    # purge on demand: output of 2 MB per job, then the file gives it back
    configure_fast(run_cli, ("keep-completed", "forever"), ("output-limit", "4000000"))
    for i in range(5):
        enqueue(run_cli, id=f"big{i}", command="head -c 2000000 /dev/urandom")
    assert queuectl(db, "worker", "start", "--burst").returncode == 0
    if is_uri(db):  # PostgreSQL's autovacuum makes the space reusable; the server keeps the files
        assert queuectl(db, "purge", "--older-than", "0").stdout == "removed 5 job(s)\n"
        assert store.counts() == {}
        return
    grown = os.path.getsize(db) + os.path.getsize(db + "-wal")
    r = queuectl(db, "purge", "--older-than", "0")
    assert r.stdout == "removed 5 job(s)\n", r
    shrunk = os.path.getsize(db) + os.path.getsize(db + "-wal")
    assert shrunk < grown - 9_000_000, (grown, shrunk)
