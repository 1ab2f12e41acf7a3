"""What a recovery kills before it gives a lost worker's jobs back (queuectl.worker.duties.recovery.kill_local),
with real process groups on this host."""

import os
import signal
import subprocess

import pytest

from queuectl.host import procs
from queuectl.domain.clock import Instant
from queuectl.domain.models import JobState
from queuectl.worker.duties.recovery import SPAWN_SETTLE, Recovery, kill_local
from queuectl.host.runner import spawn
from queuectl.store.request import Exchange, Running
from support.procstat import live_members
from support.waiting import wait_for
from support.worker_steps import NOW, add, local_worker, register


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


@pytest.fixture
def groups():
    """Start `exec sleep 60` in a session of its own with the given QUEUECTL_* variables; return its pgid."""
    started = []

    def start(**env) -> int:
        pid, out, err = spawn("exec sleep 60", None, {"PATH": os.environ["PATH"], **env})
        os.close(out)
        os.close(err)
        started.append(pid)
        # Until its exec is done, /proc/PID/environ shows this process's environment (the worker's
        # SPAWN_SETTLE covers that in recovery): wait for it, as these tests call kill_local directly.
        wait_for(lambda: _cmdline(pid).startswith(b"sleep"), timeout=10, message="the group's exec")
        return pid

    yield start
    for pid in started:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def test_a_group_never_recorded_is_found_by_the_lost_workers_id_and_pid_and_a_copy_another_worker_started_is_spared(
        store, groups):
    add(store, id="x")
    lost = local_worker(store, "lost")
    store.exchange(lost, Exchange(claim=1), [], NOW)  # claimed; no start, no group recorded
    mine = {"QUEUECTL_WORKER_ID": str(lost), "QUEUECTL_WORKER_PID": "0"}  # as local_worker registered it
    leftover = groups(QUEUECTL_JOB_ID="x", QUEUECTL_ATTEMPT="1", **mine)
    # A copy of the same job under the same attempt number, as a worker that claimed the job after
    # another recovery gave it back unstarted would run it: not the lost worker's, never killed.
    copy = groups(QUEUECTL_JOB_ID="x", QUEUECTL_ATTEMPT="1", QUEUECTL_WORKER_ID=str(lost + 1), QUEUECTL_WORKER_PID="0")
    other_job = groups(QUEUECTL_JOB_ID="y", QUEUECTL_ATTEMPT="1", **mine)
    # A job of the same id that a worker of the same number runs for another database on this host.
    other_database = groups(QUEUECTL_JOB_ID="x", QUEUECTL_ATTEMPT="1", QUEUECTL_WORKER_ID=str(lost),
                            QUEUECTL_WORKER_PID=str(os.getpid()))
    [job] = store.worker_jobs(lost)
    assert (job.job_id, job.pgid, job.started) == ("x", None, False)

    assert kill_local([job]) is True
    # SIGKILL is sent at once; the process may take a moment to exit
    wait_for(lambda: live_members(leftover) == [], timeout=10, message="the killed group to be gone")
    assert live_members(copy) == [copy] and live_members(other_job) == [other_job]
    assert live_members(other_database) == [other_database]


def test_a_recorded_group_is_killed_and_one_whose_leader_pid_was_reused_is_not(store, groups):
    add(store, id="a")
    add(store, id="b")
    lost = local_worker(store, "lost")
    store.exchange(lost, Exchange(claim=2), [], NOW)
    running = groups(QUEUECTL_JOB_ID="a", QUEUECTL_WORKER_ID=str(lost))
    reused = groups(QUEUECTL_JOB_ID="b", QUEUECTL_WORKER_ID=str(lost))
    store.exchange(lost, Exchange(running=[
        Running("a", NOW, running, procs.process_start_time(running)),
        Running("b", NOW, reused, procs.process_start_time(reused) - 1),  # another process had the pid then
    ]), [], NOW)

    assert kill_local(store.worker_jobs(lost)) is True
    # SIGKILL is sent at once; the process may take a moment to exit
    wait_for(lambda: live_members(running) == [], timeout=10, message="the killed group to be gone")
    assert live_members(reused) == [reused]


def test_a_sweep_looks_for_a_dead_workers_unrecorded_groups_only_after_spawn_settle(store, groups):
    # A job started in the instant its worker died may still be in exec(2), its environment not
    # yet readable: the sweep that finds the worker dead waits SPAWN_SETTLE before it looks.
    add(store, id="x")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    lost = local_worker(store, "lost", pid=gone.pid)
    store.exchange(lost, Exchange(claim=1), [], NOW)
    leftover = groups(QUEUECTL_JOB_ID="x", QUEUECTL_WORKER_ID=str(lost), QUEUECTL_WORKER_PID=str(gone.pid))
    watcher = register(store, "watcher")
    recovery, config = Recovery(store), store.settings()

    def sweep(mono: float) -> None:
        recovery.sweep(watcher, Instant(NOW, mono, procs.clock_domain()), config)

    sweep(100.0)
    assert (store.get_job("x").state, recovery.held, live_members(leftover)) == (JobState.PROCESSING, 1, [leftover])
    sweep(100.0 + SPAWN_SETTLE / 2)
    assert store.get_job("x").state == JobState.PROCESSING
    sweep(100.0 + SPAWN_SETTLE)
    # It ran unrecorded: its attempt counts (queuectl.domain.backoff.last_attempt).
    assert (store.get_job("x").state, store.get_job("x").attempts, recovery.held) == (JobState.FAILED, 1, 0)
    # SIGKILL is sent at once; the process may take a moment to exit
    wait_for(lambda: live_members(leftover) == [], timeout=10, message="the killed group to be gone")
