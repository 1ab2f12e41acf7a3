"""PostgreSQL workers as real processes against a real server the session starts
(tests/support/pgserver.py): wake-ups by NOTIFY, the server's clock, a worker that rides out server
restarts and outages, waits under systemd for a server not up yet, and logs when detached."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from support.cli import QUEUECTL, configure, enqueue, queuectl
from support.suite import import_or_skip
from support.waiting import wait_for
from support.workers import WorkerProcs
from support.backdoor import behind_queuectls_back
from support.engines import ON_POSTGRESQL
from queuectl.domain.models import JobState
from queuectl.store import open_store
from queuectl.store.postgres.schema import SCHEMA_VERSION
from support.pgserver import free_port
from support.notify import NotifySocket


pytestmark = ON_POSTGRESQL  # every test's `db` is a PostgreSQL queue


def _exit_within(proc, timeout: float) -> tuple[int | None, list[str]]:
    """Wait up to `timeout` seconds for `proc` to exit; return its exit code (None: it was still running,
    and is SIGKILLed) and the lines of its log."""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = WorkerProcs.output(proc).splitlines()
    proc.log.close()
    return code, lines


def _stop(proc) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    finally:
        proc.log.close()


def test_notify_wakes_an_idle_worker_that_polls_rarely(db, run_cli, store, workers, tmp_path):
    # Polls and heartbeats 30 s apart (the loop claims at either): only the NOTIFY can wake it in time.
    configure(run_cli, ("poll-interval", "30"), ("stale-after", "90"), ("heartbeat-interval", "30"))
    w = workers.start("--name", "listener")
    try:
        wait_for(lambda: store.worker_by_name("listener"), message="the worker to register")
        time.sleep(1.2)  # past its first heartbeat: it listens
        pickups = []
        for i in range(5):
            before = time.monotonic()
            enqueue(run_cli, id=f"n{i}", command="true")
            wait_for(lambda: store.get_job(f"n{i}").state == JobState.COMPLETED, timeout=10, interval=0.005,
                     message=f"job n{i} to run: {workers.output(w)}")
            pickups.append(time.monotonic() - before)
        print(f"\n  enqueue to completed with poll-interval 30 s: max {max(pickups) * 1000:.0f} ms")
        assert max(pickups) < 2, pickups  # a poll or a heartbeat would take up to 30 s
    finally:
        assert _stop(w) == 0, workers.output(w)


def test_times_are_on_the_servers_clock_whatever_this_hosts_says(db, store, workers, tmp_path):
    lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
    if not os.path.exists(lib) or shutil.which("faketime") is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    ahead = {**os.environ, "LD_PRELOAD": lib, "FAKETIME": "+1h", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
             "FAKETIME_DONT_RESET": "1"}
    probe = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], env=ahead,
                           capture_output=True, text=True, check=True)
    assert float(probe.stdout) - time.time() > 3500  # the clock of this process really is an hour ahead
    r = subprocess.run([*QUEUECTL, "--db", db, "enqueue", '{"id":"d","command":"true","delay":2}'], env=ahead,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    job = store.get_job("d")
    server_now = store.clock()
    assert abs(job.created_at - server_now) < 30 and abs(job.run_at - (job.created_at + 2)) < 0.01, job
    w = workers.start("--name", "ahead", env=ahead)
    wait_for(lambda: store.get_job("d").state == JobState.COMPLETED, message=f"the job to run: {workers.output(w)}")
    assert _stop(w) == 0
    job = store.get_job("d")
    assert job.state == JobState.COMPLETED and job.started_at >= job.run_at - 0.05, job
    assert abs(job.finished_at - store.clock()) < 30


def test_a_server_restart_loses_nothing_and_runs_nothing_twice(db, run_cli, pg_server, workers, tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    runs = tmp_path / "runs"
    runs.mkdir()
    lines = "\n".join(json.dumps({"id": f"r{i}", "command": f"echo $QUEUECTL_ATTEMPT >> {runs}/r{i}; sleep 0.3"})
                      for i in range(40))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    procs = [workers.start("--name", f"w{n}", "--count", "2") for n in range(2)]
    try:
        wait_for(lambda: len(os.listdir(runs)) >= 6, message="jobs to run")
        pg_server.stop()  # running jobs end meanwhile: their results wait in memory
        time.sleep(2)
        pg_server.start()
        wait_for(lambda: all(p.poll() is None for p in procs) and queuectl(db, "status", "--json", check=False)
                 .returncode == 0, message="the server to take connections again")
        with open_store(db) as s:
            wait_for(lambda: s.counts().get("default", {}).get("completed", 0) == 40, timeout=60,
                     message=f"every job to complete: {[workers.output(p) for p in procs]}")
            assert s.run_counts()["default"] == {"completed": 40}  # no failed attempt, no recovery
            # finished_at is when a job ended, also for those written once the server was back
            longest = max(j.finished_at - j.started_at for j in s.list_jobs(limit=100))
            assert longest < 1.5, longest
        for i in range(40):
            assert (runs / f"r{i}").read_text() == "1\n"  # each ran once
        logs = "".join(workers.output(p) for p in procs)
        assert "takes writes again" in logs, logs
    finally:
        for p in procs:
            assert _stop(p) == 0


def test_a_busy_worker_survives_fast_restarts_and_completes_every_job(db, run_cli, pg_server, workers, tmp_path):
    # The LISTEN connection breaks at each restart. A worker busy with short jobs opens pipes all
    # the time: one of them got the broken socket's fd number while the selector still held it,
    # and the worker died ("FD already registered"). Heartbeats 5 s apart (the default) leave the
    # broken connection to the wake-up path alone between two of them.
    configure(run_cli, ("poll-interval", "0.1"))
    runs = tmp_path / "runs"
    lines = "\n".join(json.dumps({"id": f"b{i:04d}", "command": f"echo b{i:04d} >> {runs}"}) for i in range(1500))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    w = workers.start("--name", "busy", "--count", "2")
    try:
        for restart in range(3):
            wait_for(lambda: runs.exists() and len(runs.read_text().split()) >= 200 * (restart + 1), timeout=60,
                     message=f"jobs to run before restart {restart + 1}: {workers.output(w)}")
            pg_server.restart("fast")
            wait_for(lambda: len(runs.read_text().split()) >= 200 * (restart + 1) + 20 or w.poll() is not None,
                     timeout=30, message=f"jobs to start again after restart {restart + 1}: {workers.output(w)}")
            assert w.poll() is None, workers.output(w)
        with open_store(db) as s:
            wait_for(lambda: s.counts().get("default", {}).get("completed", 0) == 1500, timeout=120,
                     message=f"every job to complete: {workers.output(w)}")
        assert w.poll() is None, workers.output(w)
        ran = runs.read_text().split()
        assert len(ran) == 1500 and len(set(ran)) == 1500  # each once
    finally:
        assert _stop(w) == 0, workers.output(w)


def test_the_watchdog_is_fed_through_an_outage_and_status_says_why(db, run_cli, pg_server, workers, tmp_path):
    # The loop lives while the server is down: it pings (WATCHDOG_USEC 2 s: a ping at least every
    # 2 s) and says so in STATUS=, and its running job is neither stopped nor run again.
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    gate = tmp_path / "go"
    enqueue(run_cli, id="through", command=f"while [ ! -e {gate} ]; do sleep 0.05; done")
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")
    w = workers.start("--name", "fed", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "2000000"})
    try:
        with open_store(db) as s:
            wait_for(lambda: s.get_job("through").state == JobState.PROCESSING, message=workers.output(w))
        wait_for(lambda: len(sock.pings()) >= 2, message=f"pings: {workers.output(w)}")
        pg_server.stop()
        down = time.monotonic()
        time.sleep(6)  # the outage's length: three watchdog timeouts
        up = time.monotonic()
        pg_server.start()
        wait_for(lambda: "takes writes again" in workers.output(w), timeout=30, message=workers.output(w))
        gate.touch()
        with open_store(db) as s:
            wait_for(lambda: s.get_job("through").state == JobState.COMPLETED, message=workers.output(w))
            assert s.get_job("through").attempts == 1
        pings = [p for p in sock.pings() if down - 2 <= p <= up + 2]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        print(f"\n  watchdog pings through a 6 s outage: {len(pings)}, longest gap {max(gaps):.2f} s")
        assert pings and pings[0] < down and pings[-1] > up and max(gaps) < 2.0, sock.dump(down)
        said = [t for t in sock.statuses() if t.startswith("database unavailable for ")]
        assert said and "1 job(s) running" in said[-1], sock.statuses()
        assert w.poll() is None
    finally:
        sock.close()
        assert _stop(w) == 0, workers.output(w)


def test_a_stop_while_the_server_is_down_does_not_wait_for_it_with_nothing_to_record(db, run_cli, pg_server,
                                                                                     workers, tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    w = workers.start("--name", "idle")
    try:
        wait_for(lambda: "worker idle started" in workers.output(w), message=workers.output(w))
        pg_server.stop()
        wait_for(lambda: "cannot connect" in workers.output(w) or "lost the connection" in workers.output(w),
                 message=workers.output(w))
        w.send_signal(signal.SIGTERM)
        assert w.wait(10) == 0, workers.output(w)  # not until the server is back: it has nothing to record
        assert "registration is left" in workers.output(w)
    finally:
        if not pg_server.running():
            pg_server.start()
        w.log.close()
    # The next worker of this host finds the process gone and takes the name over at once.
    r = queuectl(db, "worker", "start", "--name", "idle", "--burst")
    assert r.returncode == 0, r.stderr


def test_under_systemd_a_worker_waits_for_a_server_that_is_not_up_yet(db, run_cli, pg_server, workers, tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"))
    enqueue(run_cli, id="after-boot", command="true")
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")  # stands for systemd's
    pg_server.stop()
    w = workers.start("--name", "early", env={"NOTIFY_SOCKET": sock.address})
    try:
        wait_for(lambda: any(s.startswith("waiting for the database") for s in sock.statuses()), timeout=30,
                 message=f"the worker to say it waits: {workers.output(w)}")
        assert w.poll() is None and not sock.with_line("READY=1")
        pg_server.start()
        wait_for(lambda: sock.with_line("READY=1"), timeout=60,
                 message=f"READY once the server is up: {workers.output(w)}")
        with open_store(db) as s:
            wait_for(lambda: s.get_job("after-boot").state == JobState.COMPLETED, message=workers.output(w))
        assert workers.output(w).count("waiting for it") == 1, workers.output(w)  # said once, not at every try
    finally:
        if not pg_server.running():
            pg_server.start()
        sock.close()
        assert _stop(w) == 0


def test_under_systemd_a_worker_waits_for_an_unreachable_server_only(pg_server, tmp_path):
    # Any other error ends it at once, as off systemd: here a newer schema, in a database whose name holds
    # the words that a check of the message's text would take for a connection failure.
    name = f"cannot connect {os.getpid()}_{time.monotonic_ns()}"
    db = pg_server.create_database(name)
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")
    try:
        open_store(db).close()
        behind_queuectls_back(db, "UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
        w = WorkerProcs(db, tmp_path).start("--name", "newer", env={"NOTIFY_SOCKET": sock.address})
        code, lines = _exit_within(w, 30)
        assert code == 1 and len(lines) == 1, lines
        assert lines[0].startswith("queuectl: error: ") and "newer than this queuectl's" in lines[0], lines
        assert not any(s.startswith("waiting for the database") for s in sock.statuses())
    finally:
        sock.close()
        pg_server.drop_database(name)


def test_under_systemd_a_burst_worker_does_not_wait_for_an_unreachable_server(tmp_path):
    # A batch fails rather than hangs, whoever runs it: a unit's ExecStart, or any shell with
    # NOTIFY_SOCKET set (systemd-nspawn's); the server's wait is for long-running workers (issue 25).
    import_or_skip("psycopg")
    db = f"postgresql://queuectl@127.0.0.1:{free_port()}/queuectl"
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")
    try:
        began = time.monotonic()
        w = WorkerProcs(db, tmp_path).start("--burst", "--name", "batch", env={"NOTIFY_SOCKET": sock.address})
        code, lines = _exit_within(w, 30)
        took = time.monotonic() - began
        assert code == 1 and len(lines) == 1, (code, lines)
        assert lines[0].startswith("queuectl: error: cannot connect to database "), lines
        assert took < 15, took  # one try (connect_timeout bounds it), no retries
        assert not any(s.startswith("waiting for the database") for s in sock.statuses())
    finally:
        sock.close()


def test_a_detached_worker_logs_under_xdg_state_home(db, run_cli, store, tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    enqueue(run_cli, id="bg", command="true")
    pidfile = tmp_path / "w.pid"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("NOTIFY_SOCKET", None)
    r = subprocess.run([*QUEUECTL, "--db", db, "worker", "start", "--daemon", "--pidfile", str(pidfile),
                        "--name", "bg1"], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    try:
        wait_for(lambda: store.get_job("bg").state == JobState.COMPLETED, message="the daemon to run the job")
    finally:
        pid = wait_for(lambda: pidfile.exists() and int(pidfile.read_text()), message="the pidfile")
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: store.worker_by_name("bg1") is None, message="the daemon to drain and deregister")
    log = (tmp_path / "state" / "queuectl" / "worker-bg1.log").read_text()
    assert "job bg completed" in log and "worker bg1 stopped" in log, log
