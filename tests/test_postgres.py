"""What only the PostgreSQL store has, against a real server the session starts (tests/pgserver.py).

Its schema and migrations, connection failures as one line, passwords kept out of every
output, wake-ups by NOTIFY, the server's clock, and workers that ride out a server restart.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import QUEUECTL, configure, enqueue, import_or_skip, queuectl, raw_sql, wait_for
from queuectl.errors import DatabaseError, DatabaseUnavailable, InvalidInput
from queuectl.models import JobState
from queuectl.store import open_store
from queuectl.store.postgres.schema import SCHEMA_VERSION
from pgserver import free_port
from test_notify import NotifySocket

PASSWORD = "s3cret-pw"  # the pg_server fixture's qpass role


@pytest.fixture
def db(pg_uri):
    return pg_uri


@pytest.fixture
def password_uri(pg_server):
    """A database owned by the role qpass, which logs in with a password over TCP."""
    name = f"pw{os.getpid()}_{time.monotonic_ns()}"
    pg_server.create_database(name, owner="qpass")
    yield pg_server.uri(name, "qpass", PASSWORD)
    pg_server.drop_database(name, force=True)


def one_error_line(r: subprocess.CompletedProcess, code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("queuectl: error: "), r.stderr
    return r.stderr


# -- schema ------------------------------------------------------------------------------------------


def test_the_schema_is_created_once_by_concurrent_first_openers(db, pg_server):
    results: list = []

    def open_it():
        try:
            open_store(db).close()
            results.append("ok")
        except Exception as e:  # noqa: BLE001 - the test reports whatever went wrong
            results.append(repr(e))

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 6
    name = db.rsplit("/", 1)[1]
    assert pg_server.sql("SELECT version FROM queuectl.schema_version", dbname=name) == [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused_and_left_alone(db, pg_server):
    open_store(db).close()
    raw_sql(db, "UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(DatabaseError, match="newer than this queuectl"):
        open_store(db)
    r = queuectl(db, "status", check=False)
    assert "upgrade queuectl" in one_error_line(r, 1)


def test_a_foreign_schema_named_queuectl_is_refused(db, pg_server):
    name = db.rsplit("/", 1)[1]
    pg_server.sql("CREATE SCHEMA queuectl", dbname=name)
    pg_server.sql("CREATE TABLE queuectl.jobs (x int)", dbname=name)
    with pytest.raises(InvalidInput, match="not queuectl's"):
        open_store(db)
    assert pg_server.sql("SELECT count(*) FROM queuectl.jobs", dbname=name) == [(0,)]
    assert one_error_line(queuectl(db, "status", check=False), 2)


def test_the_queue_lives_in_its_own_schema(db, pg_server):
    open_store(db).close()
    name = db.rsplit("/", 1)[1]
    tables = {r[0] for r in pg_server.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'", dbname=name)}
    assert tables == set()  # nothing in the application's own schema


# -- connection failures and passwords -----------------------------------------------------------------


def test_a_server_that_is_not_there_is_one_line_and_exit_1(pg_server):
    port = pg_server.port + 1 if pg_server.port < 65535 else 1
    uri = f"postgresql://nobody:{PASSWORD}@127.0.0.1:{port}/nothing"
    with pytest.raises(DatabaseUnavailable):  # which a worker rides out (queuectl.worker's watchdog rule)
        open_store(uri)
    for args in (("status",), ("enqueue", '{"command":"true"}'), ("list", "--json"), ("worker", "start", "--burst")):
        line = one_error_line(queuectl(uri, *args, check=False), 1)
        assert "cannot connect to database postgresql://nobody@127.0.0.1:" in line, line
        assert PASSWORD not in line


def test_a_wrong_password_is_one_line_without_the_password(password_uri):
    wrong = password_uri.replace(PASSWORD, "not-" + PASSWORD)
    line = one_error_line(queuectl(wrong, "status", check=False), 1)
    assert "password authentication failed" in line and PASSWORD not in line, line


def test_a_malformed_uri_is_bad_input(pg_server):
    line = one_error_line(queuectl(f"postgresql://u:{PASSWORD}@127.0.0.1/x?no_such_option=1", "status", check=False), 2)
    assert "not a valid PostgreSQL URI" in line and PASSWORD not in line, line


def test_values_that_libpq_checks_only_when_it_connects_are_bad_input_too():
    # (Others, such as sslmode=bogus, give exit 1: psycopg 3.1 cuts libpq's message to the value.)
    import_or_skip("psycopg")  # no server needed, but the driver (the package build may lack it)
    uri = f"postgresql://u:{PASSWORD}@127.0.0.1:notaport/queuectl"
    line = one_error_line(queuectl(uri, "status", check=False), 2)
    assert "not a valid PostgreSQL URI" in line and PASSWORD not in line, line


#: URIs of every shape a connection's description keeps: several hosts with a port each, one port for
#: all, ports for some, socket directories among the hosts, a service, target_session_attrs.
DESCRIBED = ["postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write", "postgresql://u@h1:5432,h2/db",
             "postgresql://u@h1,h2:5433/db", "postgresql://h1,h2/db?port=5432", "postgresql://u@h:5432/d",
             "postgresql:///queuectl?host=/run/postgresql", "postgresql:///q?host=/run/postgresql,h2&port=,5433",
             "postgresql://u@h/d?port=5432&service=x", "postgresql://?service=queuectl",
             "postgresql://u@h1:1,h2:2,h3:3/d?target_session_attrs=primary"]


@pytest.mark.parametrize("uri", DESCRIBED)
def test_a_connection_is_described_as_libpq_reads_its_uri_less_the_password(uri):
    pytest.importorskip("psycopg")
    from queuectl.store.postgres.store import _display, _parse

    def read(target: str) -> dict:  # libpq's reading, one port for every host spelled out (libpq's rule)
        params = _parse(target)
        hosts, ports = params.get("host", "").split(","), params.get("port", "").split(",")
        params["port"] = ",".join(ports * len(hosts) if len(ports) == 1 else ports)
        params.pop("password", None)
        return params

    with_password = uri.replace("postgresql://u@", "postgresql://u:QxPw9@")
    shown = _display(_parse(with_password))
    assert "QxPw9" not in shown
    assert read(shown) == read(with_password), shown


def test_several_hosts_with_read_write_reach_the_primary_past_a_dead_host_and_a_standby(db, pg_server):
    name = db.rsplit("/", 1)[1]
    enqueue_json = '{"id":"ha","command":"true"}'
    open_store(db).close()  # the schema, which the standby copies
    dead = free_port()
    standby = pg_server.standby("qstandby")  # asynchronous
    try:
        hosts = f"postgresql://postgres@127.0.0.1:{dead},127.0.0.1:{standby.port},127.0.0.1:{pg_server.port}/{name}"
        assert queuectl(hosts + "?target_session_attrs=read-write", "enqueue", enqueue_json).stdout == "ha\n"
        assert pg_server.sql("SELECT id FROM queuectl.jobs", dbname=name) == [("ha",)]
        # Without it, libpq takes the first server that answers: the standby, which refuses writes.
        line = one_error_line(queuectl(hosts, "enqueue", '{"command":"true"}', check=False), 1)
        assert "read-only transaction" in line, line
    finally:
        standby.cleanup()
    assert pg_server.sql("SELECT slot_name FROM pg_replication_slots") == []  # the standby's slot went with it
    dead2 = free_port()
    uri = f"postgresql://postgres@127.0.0.1:{dead},127.0.0.1:{dead2}/{name}?target_session_attrs=read-write"
    line = one_error_line(queuectl(uri, "status", check=False), 1)
    assert f"cannot connect to database {uri}: " in line, line


@pytest.mark.parametrize("target", ["postgresql:", f"POSTGRESQL://u:{PASSWORD}@h/q", "postgresql:/h/q",
                                    "postgresq://h/q", f"host=127.0.0.1 dbname=q password={PASSWORD}"])
def test_a_value_meant_for_postgresql_that_is_no_uri_makes_no_sqlite_file(target, tmp_path):
    r = subprocess.run([*QUEUECTL, "--db", target, "status"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60)
    line = one_error_line(r, 2)
    assert "postgresql://user@host/dbname" in line and PASSWORD not in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_missing_database_given_by_the_environment_is_a_configuration_error(pg_server):
    env = {**os.environ, "QUEUECTL_DB": pg_server.uri("no_such_database")}
    r = subprocess.run([*QUEUECTL, "status"], capture_output=True, text=True, env=env, timeout=60)
    assert "does not exist" in one_error_line(r, 1)


def test_the_password_never_appears_in_output_or_logs(password_uri, tmp_path):
    queuectl(password_uri, "config", "set", "heartbeat-interval", "0.2")
    queuectl(password_uri, "config", "set", "stale-after", "1")
    queuectl(password_uri, "enqueue", '{"id":"p","command":"exit 3","max_retries":0}')
    outputs = [queuectl(password_uri, "worker", "start", "--burst", "--verbose")]
    for args in (("status",), ("status", "--json"), ("list",), ("show", "p", "--json"), ("dlq", "list"),
                 ("metrics",), ("config", "list"), ("show", "nope")):
        outputs.append(queuectl(password_uri, *args, check=False))
    for r in outputs:
        assert PASSWORD not in r.stdout + r.stderr, r
    assert json.loads(outputs[2].stdout)["jobs"]["dead"] == 1


def test_without_psycopg_a_postgresql_uri_says_what_to_install(tmp_path, pg_server):
    blocker = tmp_path / "nopsycopg"
    blocker.mkdir()
    (blocker / "psycopg.py").write_text("raise ImportError('No module named psycopg')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([*QUEUECTL, "--db", pg_server.uri("x"), "status"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert "apt-get install python3-psycopg" in one_error_line(r, 78)
    # SQLite needs no psycopg at all.
    r = subprocess.run([*QUEUECTL, "--db", str(tmp_path / "q.db"), "status"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr


# -- wake-ups and time -------------------------------------------------------------------------------------


def _start_worker(db, tmp_path, *args, env=None):
    log = open(tmp_path / f"worker-{time.monotonic_ns()}.log", "w+b")
    proc = subprocess.Popen([*QUEUECTL, "--db", db, "worker", "start", *args], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, **(env or {})})
    proc.log = log
    return proc


def _log(proc) -> str:
    proc.log.flush()
    proc.log.seek(0)
    return proc.log.read().decode(errors="replace")


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
    lines = _log(proc).splitlines()
    proc.log.close()
    return code, lines


def _stop(proc) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    finally:
        proc.log.close()


@pytest.mark.processes
def test_notify_wakes_an_idle_worker_that_polls_rarely(db, run_cli, store, tmp_path):
    # Polls and heartbeats 30 s apart (the loop claims at either): only the NOTIFY can wake it in time.
    configure(run_cli, ("poll-interval", "30"), ("stale-after", "90"), ("heartbeat-interval", "30"))
    w = _start_worker(db, tmp_path, "--name", "listener")
    try:
        wait_for(lambda: store.worker_by_name("listener"), message="the worker to register")
        time.sleep(1.2)  # past its first heartbeat: it listens
        pickups = []
        for i in range(5):
            before = time.monotonic()
            enqueue(run_cli, id=f"n{i}", command="true")
            wait_for(lambda: store.get_job(f"n{i}").state == JobState.COMPLETED, timeout=10, interval=0.005,
                     message=f"job n{i} to run: {_log(w)}")
            pickups.append(time.monotonic() - before)
        print(f"\n  enqueue to completed with poll-interval 30 s: max {max(pickups) * 1000:.0f} ms")
        assert max(pickups) < 2, pickups  # a poll or a heartbeat would take up to 30 s
    finally:
        assert _stop(w) == 0, _log(w)


@pytest.mark.processes
def test_times_are_on_the_servers_clock_whatever_this_hosts_says(db, store, tmp_path):
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
    w = _start_worker(db, tmp_path, "--name", "ahead", env=ahead)
    wait_for(lambda: store.get_job("d").state == JobState.COMPLETED, message=f"the job to run: {_log(w)}")
    assert _stop(w) == 0
    job = store.get_job("d")
    assert job.state == JobState.COMPLETED and job.started_at >= job.run_at - 0.05, job
    assert abs(job.finished_at - store.clock()) < 30


# -- faults ------------------------------------------------------------------------------------------------


@pytest.mark.processes
def test_a_server_restart_loses_nothing_and_runs_nothing_twice(db, run_cli, pg_server, tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    runs = tmp_path / "runs"
    runs.mkdir()
    lines = "\n".join(json.dumps({"id": f"r{i}", "command": f"echo $QUEUECTL_ATTEMPT >> {runs}/r{i}; sleep 0.3"})
                      for i in range(40))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    procs = [_start_worker(db, tmp_path, "--name", f"w{n}", "--count", "2") for n in range(2)]
    try:
        wait_for(lambda: len(os.listdir(runs)) >= 6, message="jobs to run")
        pg_server.stop()  # running jobs end meanwhile: their results wait in memory
        time.sleep(2)
        pg_server.start()
        wait_for(lambda: all(p.poll() is None for p in procs) and queuectl(db, "status", "--json", check=False)
                 .returncode == 0, message="the server to take connections again")
        with open_store(db) as s:
            wait_for(lambda: s.counts().get("default", {}).get("completed", 0) == 40, timeout=60,
                     message=f"every job to complete: {[_log(p) for p in procs]}")
            assert s.run_counts()["default"] == {"completed": 40}  # no failed attempt, no recovery
            # finished_at is when a job ended, also for those written once the server was back
            longest = max(j.finished_at - j.started_at for j in s.list_jobs(limit=100))
            assert longest < 1.5, longest
        for i in range(40):
            assert (runs / f"r{i}").read_text() == "1\n"  # each ran once
        logs = "".join(_log(p) for p in procs)
        assert "takes writes again" in logs, logs
    finally:
        for p in procs:
            assert _stop(p) == 0


@pytest.mark.processes
def test_a_busy_worker_survives_fast_restarts_and_completes_every_job(db, run_cli, pg_server, tmp_path):
    # The LISTEN connection breaks at each restart. A worker busy with short jobs opens pipes all
    # the time: one of them got the broken socket's fd number while the selector still held it,
    # and the worker died ("FD already registered"). Heartbeats 5 s apart (the default) leave the
    # broken connection to the wake-up path alone between two of them.
    configure(run_cli, ("poll-interval", "0.1"))
    runs = tmp_path / "runs"
    lines = "\n".join(json.dumps({"id": f"b{i:04d}", "command": f"echo b{i:04d} >> {runs}"}) for i in range(1500))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    w = _start_worker(db, tmp_path, "--name", "busy", "--count", "2")
    try:
        for restart in range(3):
            wait_for(lambda: runs.exists() and len(runs.read_text().split()) >= 200 * (restart + 1), timeout=60,
                     message=f"jobs to run before restart {restart + 1}: {_log(w)}")
            pg_server.restart("fast")
            wait_for(lambda: len(runs.read_text().split()) >= 200 * (restart + 1) + 20 or w.poll() is not None,
                     timeout=30, message=f"jobs to start again after restart {restart + 1}: {_log(w)}")
            assert w.poll() is None, _log(w)
        with open_store(db) as s:
            wait_for(lambda: s.counts().get("default", {}).get("completed", 0) == 1500, timeout=120,
                     message=f"every job to complete: {_log(w)}")
        assert w.poll() is None, _log(w)
        ran = runs.read_text().split()
        assert len(ran) == 1500 and len(set(ran)) == 1500  # each once
    finally:
        assert _stop(w) == 0, _log(w)


@pytest.mark.processes
def test_the_watchdog_is_fed_through_an_outage_and_status_says_why(db, run_cli, pg_server, tmp_path):
    # The loop lives while the server is down: it pings (WATCHDOG_USEC 2 s: a ping at least every
    # 2 s) and says so in STATUS=, and its running job is neither stopped nor run again.
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    gate = tmp_path / "go"
    enqueue(run_cli, id="through", command=f"while [ ! -e {gate} ]; do sleep 0.05; done")
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")
    w = _start_worker(db, tmp_path, "--name", "fed", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "2000000"})
    try:
        with open_store(db) as s:
            wait_for(lambda: s.get_job("through").state == JobState.PROCESSING, message=_log(w))
        wait_for(lambda: len(sock.pings()) >= 2, message=f"pings: {_log(w)}")
        pg_server.stop()
        down = time.monotonic()
        time.sleep(6)  # the outage's length: three watchdog timeouts
        up = time.monotonic()
        pg_server.start()
        wait_for(lambda: "takes writes again" in _log(w), timeout=30, message=_log(w))
        gate.touch()
        with open_store(db) as s:
            wait_for(lambda: s.get_job("through").state == JobState.COMPLETED, message=_log(w))
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
        assert _stop(w) == 0, _log(w)


@pytest.mark.processes
def test_a_stop_while_the_server_is_down_does_not_wait_for_it_with_nothing_to_record(db, run_cli, pg_server,
                                                                                     tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"), ("poll-interval", "0.1"))
    w = _start_worker(db, tmp_path, "--name", "idle")
    try:
        wait_for(lambda: "worker idle started" in _log(w), message=_log(w))
        pg_server.stop()
        wait_for(lambda: "cannot connect" in _log(w) or "lost the connection" in _log(w), message=_log(w))
        w.send_signal(signal.SIGTERM)
        assert w.wait(10) == 0, _log(w)  # not until the server is back: it has nothing to record
        assert "registration is left" in _log(w)
    finally:
        if not pg_server.running():
            pg_server.start()
        w.log.close()
    # The next worker of this host finds the process gone and takes the name over at once.
    r = queuectl(db, "worker", "start", "--name", "idle", "--burst")
    assert r.returncode == 0, r.stderr


@pytest.mark.processes
def test_under_systemd_a_worker_waits_for_a_server_that_is_not_up_yet(db, run_cli, pg_server, tmp_path):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("stale-after", "5"))
    enqueue(run_cli, id="after-boot", command="true")
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")  # stands for systemd's
    pg_server.stop()
    w = _start_worker(db, tmp_path, "--name", "early", env={"NOTIFY_SOCKET": sock.address})
    try:
        wait_for(lambda: any(s.startswith("waiting for the database") for s in sock.statuses()), timeout=30,
                 message=f"the worker to say it waits: {_log(w)}")
        assert w.poll() is None and not sock.with_line("READY=1")
        pg_server.start()
        wait_for(lambda: sock.with_line("READY=1"), timeout=60, message=f"READY once the server is up: {_log(w)}")
        with open_store(db) as s:
            wait_for(lambda: s.get_job("after-boot").state == JobState.COMPLETED, message=_log(w))
        assert _log(w).count("waiting for it") == 1, _log(w)  # said once, not at every try
    finally:
        if not pg_server.running():
            pg_server.start()
        sock.close()
        assert _stop(w) == 0


@pytest.mark.processes
def test_under_systemd_a_worker_waits_for_an_unreachable_server_only(pg_server, tmp_path):
    # Any other error ends it at once, as off systemd: here a newer schema, in a database whose name holds
    # the words that a check of the message's text would take for a connection failure.
    name = f"cannot connect {os.getpid()}_{time.monotonic_ns()}"
    db = pg_server.create_database(name)
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")
    try:
        open_store(db).close()
        raw_sql(db, "UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
        w = _start_worker(db, tmp_path, "--name", "newer", env={"NOTIFY_SOCKET": sock.address})
        code, lines = _exit_within(w, 30)
        assert code == 1 and len(lines) == 1, lines
        assert lines[0].startswith("queuectl: error: ") and "newer than this queuectl's" in lines[0], lines
        assert not any(s.startswith("waiting for the database") for s in sock.statuses())
    finally:
        sock.close()
        pg_server.drop_database(name)


@pytest.mark.processes
def test_under_systemd_a_burst_worker_does_not_wait_for_an_unreachable_server(tmp_path):
    # A batch fails rather than hangs, whoever runs it: a unit's ExecStart, or any shell with
    # NOTIFY_SOCKET set (systemd-nspawn's); the server's wait is for long-running workers (issue 25).
    import_or_skip("psycopg")
    db = f"postgresql://queuectl@127.0.0.1:{free_port()}/queuectl"
    sock = NotifySocket(f"@queuectl-test/{os.getpid()}/{time.monotonic_ns()}")
    try:
        began = time.monotonic()
        w = _start_worker(db, tmp_path, "--burst", "--name", "batch", env={"NOTIFY_SOCKET": sock.address})
        code, lines = _exit_within(w, 30)
        took = time.monotonic() - began
        assert code == 1 and len(lines) == 1, (code, lines)
        assert lines[0].startswith("queuectl: error: cannot connect to database "), lines
        assert took < 15, took  # one try (connect_timeout bounds it), no retries
        assert not any(s.startswith("waiting for the database") for s in sock.statuses())
    finally:
        sock.close()


def test_the_site_configuration_may_name_a_postgresql_database(db, tmp_path):
    conf = tmp_path / "queuectl.conf"
    conf.write_text(f"[queuectl]\ndb = {db}\n\n[defaults]\nmax-retries = 7\n")
    env = {**os.environ, "QUEUECTL_CONFIG": str(conf)}
    env.pop("QUEUECTL_DB", None)
    r = subprocess.run([*QUEUECTL, "enqueue", '{"id":"c","command":"true"}'], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == "c\n", r.stderr
    r = subprocess.run([*QUEUECTL, "config", "get", "max-retries"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.stdout == "7\n", r
    with open_store(db) as s:
        assert s.get_job("c").state == JobState.PENDING
    conf.write_text("[queuectl]\ndb = mysql://u@h/q\n")
    r = subprocess.run([*QUEUECTL, "status"], capture_output=True, text=True, env=env, timeout=60)
    assert "db must be an absolute path or a postgresql:// URI" in one_error_line(r, 78)


@pytest.mark.processes
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


def test_a_burst_drain_leaves_its_counters_folded(db, run_cli, store):
    lines = "\n".join(json.dumps({"id": f"b{i}", "command": "true"}) for i in range(30))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    assert queuectl(db, "worker", "start", "--burst", "--count", "2").returncode == 0
    assert store.c.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0] == 0
    assert store.c.execute("SELECT count(*) FROM job_run_deltas").fetchone()[0] == 0
    assert store.counts() == {"default": {"completed": 30}} and store.run_counts() == {"default": {"completed": 30}}


def test_connections_give_up_on_a_vanished_server_within_seconds_unless_the_uri_says_otherwise(db):
    # The kernel alone would wait about 15 minutes for a host that lost power (TCP retransmissions).
    with open_store(db) as s:
        params = s._connect().info.get_parameters()
        assert (params.get("tcp_user_timeout"), params.get("keepalives_idle")) == ("10000", "5"), params
    own = db + ("&" if "?" in db else "?") + "tcp_user_timeout=60000"
    with open_store(own) as s:
        assert s._connect().info.get_parameters()["tcp_user_timeout"] == "60000"
