"""The runner with real /bin/sh processes."""

import os
import signal
import time


from queuectl.host import procs
from queuectl.host.runner import Runner, job_environment, run

from support.procstat import gone
from support.waiting import wait_for


def test_exit_status_and_output():
    r = run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.error, r.stdout, r.stderr, r.ok) == (3, "exit code 3", b"out\n", b"err\n", False)
    assert run("true").ok and run("true").error is None


def test_a_zero_timeout_still_reads_the_pipes():
    # A worker whose database fails waits with short timeouts; the jobs' output must still be
    # read, or a job that prints more than a pipe holds blocks forever.
    runner = Runner(output_limit=1 << 20)
    try:
        runner.start("big", "head -c 1000000 /dev/zero")
        deadline = time.monotonic() + 20
        done = []
        while not done and time.monotonic() < deadline:
            done, _ = runner.wait(0)
        assert done and done[0][1].ok and len(done[0][1].stdout) == 1000000
        empty = Runner(output_limit=0)  # and with nothing to watch, a timeout still ends the wait
        assert empty.wait(0) == ([], False) and empty.wait(0.01) == ([], False)
        empty.close()
    finally:
        runner.close()


def test_killed_by_signal_is_a_failure():
    r = run("kill -TERM $$")
    assert r.exit_code is None and r.error == "killed by signal 15 (SIGTERM)"


def test_large_output_does_not_deadlock_and_keeps_the_tail():
    r = run("head -c 10000000 /dev/zero | tr '\\0' x; printf END; head -c 3000000 /dev/zero >&2", output_limit=1000)
    assert r.ok
    assert r.stdout == b"x" * 997 + b"END"
    assert r.stderr == b"\0" * 1000


def test_non_utf8_output_is_kept_as_bytes():
    assert run("printf '\\377\\376abc'").stdout == b"\xff\xfeabc"


def test_output_limit_zero_keeps_nothing():
    assert run("echo hi", output_limit=0).stdout == b""


def test_cwd_and_missing_cwd(tmp_path):
    assert run("pwd", cwd=str(tmp_path)).stdout.decode().strip() == str(tmp_path)
    r = run("pwd", cwd=str(tmp_path / "missing"))
    assert not r.ok and r.error.startswith("cannot start: No such file or directory")


def test_timeout_kills_the_whole_group_including_grandchildren(tmp_path):
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    r = run(f"sleep 60 & echo $! > {pidfile}; wait", timeout=0.5, kill_grace=1)
    assert r.timed_out and r.error == "timed out after 0.5 s" and r.exit_code is None
    assert time.monotonic() - start < 10
    wait_for(lambda: gone(int(pidfile.read_text())), 5, message="grandchild sleep to die")


def test_timeout_escalates_to_sigkill_when_term_is_ignored(tmp_path):
    r = run("trap '' TERM; sleep 30 & wait; sleep 30", timeout=0.3, kill_grace=0.3)
    assert r.timed_out and r.duration < 10


def test_jobs_run_in_their_own_session(tmp_path):
    out = run("ps -o pid=,pgid=,sid= -p $$").stdout.split()
    pid, pgid, sid = map(int, out)
    assert pid == pgid == sid
    assert sid != os.getsid(0)


def test_environment_is_scrubbed_of_service_manager_variables(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/x")
    monkeypatch.setenv("WATCHDOG_USEC", "1000")
    monkeypatch.setenv("WATCHDOG_PID", "1")
    monkeypatch.setenv("KEEP_ME", "yes")
    out = run("env", env=job_environment({"QUEUECTL_JOB_ID": "j"})).stdout.decode()
    assert "NOTIFY_SOCKET" not in out and "WATCHDOG_" not in out
    assert "KEEP_ME=yes" in out and "QUEUECTL_JOB_ID=j" in out


def test_runner_runs_jobs_concurrently_and_reports_each():
    runner = Runner(1 << 16)
    try:
        start = time.monotonic()
        for i in range(3):
            runner.start(i, f"sleep 0.5; echo {i}")
        results = {}
        while len(results) < 3:
            done, _ = runner.wait(10)
            results.update(done)
        assert {k: r.stdout for k, r in results.items()} == {0: b"0\n", 1: b"1\n", 2: b"2\n"}
        assert time.monotonic() - start < 1.4  # together, not one after another
    finally:
        runner.close()


def test_start_failure_is_reported_by_wait():
    runner = Runner(100)
    try:
        assert runner.start("k", "true", cwd="/nonexistent/dir") is None
        done, woken = runner.wait(1)
        assert [k for k, _ in done] == ["k"] and not done[0][1].ok and not woken
    finally:
        runner.close()


def test_wait_returns_when_a_wake_fd_fires():
    r, w = os.pipe()
    runner = Runner(100)
    try:
        runner.add_wake_fd(r)
        runner.start("slow", "sleep 5")
        os.write(w, b"x")
        t = time.monotonic()
        done, woken = runner.wait(10)
        assert woken and done == [] and time.monotonic() - t < 1
        os.read(r, 1)
        runner.stop_all(signal.SIGKILL)
        done, _ = runner.wait(10)
        assert done[0][1].error == "killed by signal 9 (SIGKILL)"
    finally:
        runner.close()
        os.close(r)
        os.close(w)


def test_job_process_identity_is_recorded():
    runner = Runner(100)
    try:
        job = runner.start("k", "sleep 5")
        assert job.pgid_start == procs.process_start_time(job.pgid)
        assert procs.group_alive(job.pgid, job.pgid_start)
        assert not procs.group_alive(job.pgid, job.pgid_start + 1)  # a recycled pid is not our group
        assert procs.kill_group(job.pgid, job.pgid_start)
        done, _ = runner.wait(10)
        assert done[0][1].error.startswith("killed by signal 9")
        # the shell is reaped; its SIGKILLed child may take a moment more to exit
        wait_for(lambda: not procs.group_alive(job.pgid, job.pgid_start), 5, message="the group to die")
    finally:
        runner.close()


def test_a_job_whose_group_was_never_recorded_is_found_by_its_environment():
    from queuectl.host.runner import JobEnvironment
    from queuectl.worker.duties.recovery import kill_local
    from queuectl.store import JobProcess

    # The environment is searched host-wide: an id of this process's own keeps another run of the suite
    # on this machine (a second checkout's) from being found, or killed, here.
    job_id = f"lost-{os.getpid()}"
    runner = Runner(100)
    try:
        env = JobEnvironment().job({"QUEUECTL_JOB_ID": job_id, "QUEUECTL_ATTEMPT": "2", "QUEUECTL_WORKER_ID": "7",
                                    "QUEUECTL_WORKER_PID": "4242"})
        job = runner.start("k", "sleep 30 & sleep 30", env=env)
        wait_for(lambda: procs.groups_with_env(f"QUEUECTL_JOB_ID={job_id}".encode()) == {job.pgid}, 5,
                 message="the job's group to be found by its environment")
        assert procs.groups_with_env(b"QUEUECTL_JOB_ID=lost-") == set()  # whole entries only
        # The same job as another worker (#8) held it: this copy is not its leftover, and is left alone.
        elsewhere = JobProcess(job_id, 8, None, None, procs.hostname(), procs.boot_id(), attempts=1, started=False,
                               worker_pid=4242)
        assert kill_local([elsewhere]) and runner.wait(0.3) == ([], False)
        # Worker #7's, started before its start (or its group) was recorded.
        unrecorded = JobProcess(job_id, 7, None, None, procs.hostname(), procs.boot_id(), attempts=1, started=False,
                                worker_pid=4242)
        assert kill_local([unrecorded])  # what a recovery does for a job with no recorded group
        done, _ = runner.wait(10)
        assert done[0][1].error.startswith("killed by signal 9")
        wait_for(lambda: not procs.group_alive(job.pgid, job.pgid_start), 5, message="the whole group to die")
    finally:
        runner.close()


def test_jobs_get_default_sigpipe_and_no_inherited_descriptors(tmp_path):
    # Python ignores SIGPIPE; a job must not, or `yes | head` would never end.
    r = run("yes | head -n 1", timeout=10)
    assert r.ok and r.stdout == b"y\n" and not r.timed_out
    # Only stdin, stdout and stderr reach the job, even when the worker inherited more.
    extra = os.open("/dev/null", os.O_RDONLY)
    os.set_inheritable(extra, True)
    try:
        fds = run("ls /proc/$$/fd").stdout.split()
    finally:
        os.close(extra)
    assert sorted(fds) == [b"0", b"1", b"2"], fds
    assert run("readlink /proc/$$/fd/0").stdout.strip() == b"/dev/null"


def test_boot_identity_survives_a_different_boot_id_view_but_not_a_reboot():
    mine = procs.boot_id()
    kernel_id, btime = mine.split(" ")
    assert procs.same_boot(mine)
    assert procs.same_boot(f"other-namespace-view {btime}")  # a sandboxed /proc under nspawn
    assert procs.same_boot(f"{kernel_id} {int(btime) + 3600}")  # the wall clock was stepped
    assert not procs.same_boot(f"another-boot {int(btime) - 60}")  # rebooted a minute later
    assert not procs.same_boot("") and not procs.same_boot("garbage")


def test_a_real_time_signal_is_named_not_a_crash():
    r = run("kill -40 $$")
    assert r.exit_code is None and r.error == "killed by signal 40 (SIG40)"


def test_a_stopped_job_leaves_no_member_that_ignored_sigterm(tmp_path):
    pidfile = tmp_path / "pid"
    runner = Runner(100, kill_grace=30)  # the grace would let a TERM-proof member live on
    try:
        runner.start("k", f"(trap '' TERM; exec sleep 60) & echo $! > {pidfile}; wait")
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 5, message="the grandchild to start")
        grandchild = int(pidfile.read_text())
        runner.stop_all(signal.SIGTERM)  # what a second stop signal does
        done, _ = runner.wait(10)
        assert done and done[0][1].error == "killed by signal 15 (SIGTERM)"
        wait_for(lambda: gone(grandchild), 5, message="the TERM-proof grandchild to be killed")
    finally:
        runner.close()


def test_a_command_that_begins_with_a_dash_is_run_as_a_command_not_read_as_the_shells_option():
    r = run("-x-no-such-command", timeout=10)  # without `--`, sh took it for its -x option and ran nothing
    assert r.exit_code == 127 and b"-x-no-such-command: not found" in r.stderr, r
    assert run("--help-no-such-command", timeout=10).exit_code == 127
