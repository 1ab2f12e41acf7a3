"""The worker under systemd and without it: sd_notify(3), journal priorities, --daemon, env configuration.

The sd_notify tests bind a REAL AF_UNIX SOCK_DGRAM socket (a short path in /tmp, or an
abstract name "@...") the way systemd does, pass it to a real `queuectl worker start`
process as NOTIFY_SOCKET, and record every datagram with its arrival time (monotonic)
and its sender's pid (SO_PASSCRED), from a reader thread. No mocks.

The machine is small and noisy: tests wait on conditions; the only fixed waits are the
windows in which something must NOT happen (a held lock, a job's duration).
"""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from support.cli import QUEUECTL, configure, enqueue, queuectl
from support.notify import Message, NotifySocket
from support.waiting import wait_for
from support.procstat import gone
from support.workers import WorkerProcs, read_pid, state_is, until, wait_exit
from queuectl.host import logsetup
from queuectl.domain.models import JobState
from queuectl.host.notify import Notifier, watchdog_interval
from queuectl.store import SqliteStore


#: Variables a test environment might carry that would change what the worker does.
_FOREIGN_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM", "QUEUECTL_DB",
                "QUEUECTL_UNIT", "QUEUECTL_WORKER_COUNT", "QUEUECTL_WORKER_QUEUES", "QUEUECTL_WORKER_NAME")
#: Short timings (heartbeat first: stale-after must exceed 2 x heartbeat-interval).
FAST = (("heartbeat-interval", "0.2"), ("poll-interval", "0.05"), ("stale-after", "5"))


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    env.update(extra)
    return env


# -- a stand-in for systemd's notify socket (support.notify) -----------------------------------


@pytest.fixture
def notify_socket():
    """Factory: notify_socket(kind="abstract" | "path", on_message=None, prepare=None) -> a bound NotifySocket."""
    made: list[NotifySocket] = []
    dirs: list[str] = []

    def make(kind: str = "abstract", on_message=None, prepare=None) -> NotifySocket:
        if kind == "abstract":
            address = f"@queuectl-test/{os.getpid()}/{uuid.uuid4().hex[:12]}"
        else:  # a short path: sun_path holds 108 bytes, and pytest's tmp_path can be long
            d = tempfile.mkdtemp(prefix="qn", dir="/tmp")
            dirs.append(d)
            address = os.path.join(d, "notify")
        s = NotifySocket(address, on_message, prepare)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


# -- worker processes -------------------------------------------------------------------------------


def spawn(workers: WorkerProcs, *args: str, env: dict | None = None, own_watchdog_pid: bool = False,
          journal: bool = False) -> subprocess.Popen:
    """Start `queuectl worker start ARGS` in its own session, stdout and stderr to a log file.

    own_watchdog_pid: start through `sh -c 'WATCHDOG_PID=$$ ... exec ...'`, so WATCHDOG_PID
    names the worker itself, as systemd sets it. journal: set JOURNAL_STREAM to the log
    file's "dev:ino", as systemd does when stderr is the journal. The process joins
    `workers`, whose teardown kills it if it still runs.
    """
    log = open(workers.tmp_path / f"worker-{len(workers.procs)}.log", "w+b")
    env = clean_env(**(env or {}))
    if journal:
        st = os.fstat(log.fileno())
        env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    cmd = [*QUEUECTL, "--db", workers.db, "worker", "start", *args]
    if own_watchdog_pid:
        cmd = ["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"', "sh", *cmd]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)
    proc.log = log
    workers.procs.append(proc)
    return proc


def gate_command(directory, name: str = "go") -> str:
    """A job command that runs until the file DIRECTORY/NAME exists (the test decides when it ends)."""
    path = os.path.join(str(directory), name)
    assert re.fullmatch(r"[\w/.+-]+", path), path
    return f"while [ ! -e {path} ]; do sleep 0.05; done"


def describe(proc, sock: NotifySocket | None = None, since: float = 0.0) -> str:
    text = f"\n--- worker pid {proc.pid} log ---\n{WorkerProcs.output(proc)}"
    if sock is not None:
        text += f"\n--- notify messages (s since start) ---\n{sock.dump(since)}"
        if sock.errors:
            text += f"\n--- reader errors ---\n{sock.errors!r}"
    return text


def until_notified(predicate, what: str, proc, sock=None, timeout: float = 30.0, since: float = 0.0):
    """until, with the worker's log and the notify messages it sent (from `since`) in the failure."""
    return until(predicate, what, timeout, more=lambda: describe(proc, sock, since))


def exit_notified(proc, sock=None, timeout: float = 30.0) -> int:
    """wait_exit; then, with `sock`, wait for every message the worker sent to be recorded."""
    code = wait_exit(proc, timeout, more=lambda: describe(proc, sock))
    if sock is not None:
        sock.settle()
    return code


def ready(sock: NotifySocket):
    return lambda: sock.with_line("READY=1")


# == sd_notify against a real socket ===================================================================


class RowAtReady:
    """Reader-thread hooks: look the worker up in the database the moment READY=1 arrives.

    The store is opened in the reader thread beforehand, so the look-up takes no time to set up.
    """

    def __init__(self, db: str, name: str):
        self.db, self.name = db, name
        self.store: SqliteStore | None = None
        self.rows: list = []

    def prepare(self) -> None:
        self.store = SqliteStore(self.db)

    def on_message(self, m: Message) -> None:
        if "READY=1" in m.lines and self.store is not None:
            self.rows.append(self.store.worker_by_name(self.name))
            self.store.close()  # in the thread that opened it
            self.store = None


@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_ready_is_first_and_sent_only_once_registered(db, store, workers, notify_socket, kind):
    at_ready = RowAtReady(db, "rdy")
    sock = notify_socket(kind, at_ready.on_message, at_ready.prepare)
    t0 = time.monotonic()
    w = spawn(workers, "--name", "rdy", own_watchdog_pid=True,
              env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000"})
    until_notified(ready(sock), "READY=1", w, sock, since=t0)
    until_notified(lambda: len(sock.pings()) >= 2, "two watchdog pings after READY", w, sock, since=t0)

    first = sock.messages[0]
    assert first.lines[0] == "READY=1", sock.dump(t0)
    assert first.get("STATUS") == "idle, 1 slot(s); 0 done, 0 failed"
    assert len(sock.with_line("READY=1")) == 1
    assert not sock.errors, sock.errors
    [row] = at_ready.rows
    assert row is not None, "READY=1 arrived before the worker's row was in the database"
    assert row.pid == w.pid  # the shell exec'd the worker: same pid
    # NotifyAccess=main: every message must come from the main process itself.
    assert {m.pid for m in sock.messages} == {w.pid}, sock.dump(t0)

    w.send_signal(signal.SIGTERM)
    assert exit_notified(w, sock) == 0
    assert len(sock.with_line("STOPPING=1")) == 1  # (a heartbeat while draining may still ping after it)


def test_ready_waits_while_the_database_is_locked(db, store, workers, notify_socket):
    at_ready = RowAtReady(db, "late")
    sock = notify_socket("abstract", at_ready.on_message, at_ready.prepare)
    locker = sqlite3.connect(db, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        w = spawn(workers, "--name", "late", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000"})
        # Once the worker has the database open, give it time to reach its registration.
        until_notified(lambda: any(os.path.realpath(f"/proc/{w.pid}/fd/{fd}").startswith(db)
                          for fd in os.listdir(f"/proc/{w.pid}/fd")),
              "the worker to open the database", w)
        time.sleep(1.5)
        assert sock.messages == [], sock.dump()  # no READY, and no ping, while it cannot register
        assert w.poll() is None, describe(w)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    until_notified(ready(sock), "READY=1 once the lock is gone", w, sock)
    assert sock.messages[0].lines[0] == "READY=1"
    assert at_ready.rows and at_ready.rows[0] is not None and not sock.errors
    w.send_signal(signal.SIGTERM)
    assert exit_notified(w, sock) == 0


def test_watchdog_drives_the_heartbeat_during_a_long_job(db, run_cli, store, workers, notify_socket):
    assert store.settings()["heartbeat-interval"] == 5.0  # the default: only the watchdog can make it 0.5 s
    enqueue(run_cli, id="long", command="sleep 3")
    sock = notify_socket("path")
    t0 = time.monotonic()
    w = spawn(workers, "--name", "wd", own_watchdog_pid=True,
              env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000"})
    until_notified(state_is(store, "long", JobState.COMPLETED), "the 3 s job to complete", w, sock, timeout=60, since=t0)
    until_notified(lambda: sock.statuses()[-1:] == ["idle, 1 slot(s); 1 done, 0 failed"],
          "the idle status after the job", w, sock, since=t0)
    w.send_signal(signal.SIGTERM)
    assert exit_notified(w, sock) == 0

    msgs = sock.messages
    ready_at = sock.with_line("READY=1")[0].at
    began = next(m.at for m in msgs if (m.get("STATUS") or "").startswith("running 1/1 job(s): long"))
    ended = next(m.at for m in msgs if m.get("STATUS") == "idle, 1 slot(s); 1 done, 0 failed")
    stopping = sock.with_line("STOPPING=1")[0].at
    pings = sock.pings()
    detail = sock.dump(t0)
    # systemd's limit: never more than WATCHDOG_USEC between READY and a ping or between two pings.
    beats = [ready_at] + [p for p in pings if p < stopping]
    gaps = [b - a for a, b in zip(beats, beats[1:])]
    assert gaps and max(gaps) <= 1.0, f"gaps {gaps}\n{detail}"
    # About every WATCHDOG_USEC / 2 = 0.5 s while the job ran (a 5 s heartbeat would give none).
    during = [p for p in pings if began <= p <= ended]
    assert len(during) >= 4, f"{len(during)} pings in {ended - began:.2f} s\n{detail}"
    median = statistics.median(b - a for a, b in zip(during, during[1:]))
    assert 0.3 <= median <= 0.8, f"median gap {median:.3f}\n{detail}"
    assert {m.pid for m in msgs} == {w.pid}, detail


def test_status_follows_the_running_jobs(tmp_path, run_cli, store, workers, notify_socket):
    configure(run_cli, *FAST)
    enqueue(run_cli, id="st1", command=gate_command(tmp_path, "go1"))
    sock = notify_socket()
    w = spawn(workers, "--name", "st", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "2000000"})
    running = "running 1/1 job(s): st1; 0 done, 0 failed"
    until_notified(lambda: running in sock.statuses(), "the running status", w, sock)
    assert store.get_job("st1").state == JobState.PROCESSING
    (tmp_path / "go1").touch()
    idle = "idle, 1 slot(s); 1 done, 0 failed"
    until_notified(lambda: sock.statuses()[-1:] == [idle], "the idle status with the done count", w, sock)
    assert store.get_job("st1").state == JobState.COMPLETED

    enqueue(run_cli, id="st2", command="exit 3", max_retries=0)
    until_notified(lambda: sock.statuses()[-1:] == ["idle, 1 slot(s); 1 done, 1 failed"], "the failed count", w, sock)
    w.send_signal(signal.SIGTERM)
    assert exit_notified(w, sock) == 0

    statuses = sock.statuses()
    assert statuses[0] == "idle, 1 slot(s); 0 done, 0 failed"  # with READY=1
    assert statuses.index(running) < statuses.index(idle)
    # A status is sent when it changes, not on every turn of the loop.
    assert all(a != b for a, b in zip(statuses, statuses[1:])), statuses


def test_stopping_on_sigterm_and_the_running_job_completes(tmp_path, run_cli, store, workers, notify_socket):
    configure(run_cli, *FAST)
    enqueue(run_cli, id="drain", command=gate_command(tmp_path))
    sock = notify_socket("path")
    w = spawn(workers, "--name", "stp", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "2000000"})
    until_notified(lambda: any(s.startswith("running 1/1 job(s): drain") for s in sock.statuses()),
          "the job to run", w, sock)
    assert not sock.with_line("STOPPING=1")

    w.send_signal(signal.SIGTERM)
    [stop] = until_notified(lambda: sock.with_line("STOPPING=1"), "STOPPING=1", w, sock)
    assert stop.get("STATUS") == "draining 1 job(s)"
    assert w.poll() is None and store.get_job("drain").state == JobState.PROCESSING  # still draining
    # A drain may be long: the watchdog keeps being fed meanwhile, or systemd would abort it.
    until_notified(lambda: len([p for p in sock.pings() if p > stop.at]) >= 2, "pings while draining", w, sock)
    (tmp_path / "go").touch()
    assert exit_notified(w, sock) == 0, describe(w, sock)
    job = store.get_job("drain")
    assert job.state == JobState.COMPLETED and job.exit_code == 0
    assert store.worker_by_name("stp") is None  # deregistered after the clean stop

    msgs = sock.messages
    assert msgs[0].lines[0] == "READY=1"
    assert len(sock.with_line("STOPPING=1")) == 1
    assert not any("READY=1" in m.lines for m in msgs[msgs.index(stop):])


def test_job_environment_has_no_notify_variables(tmp_path, run_cli, workers, notify_socket):
    configure(run_cli, *FAST)
    out = tmp_path / "env.txt"
    enqueue(run_cli, id="envjob", command=f"env > {out}")
    sock = notify_socket("path")
    w = spawn(workers, "--burst", "--name", "envw", own_watchdog_pid=True,
              env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000", "QUEUECTL_TEST_MARKER": "kept"})
    assert exit_notified(w, sock) == 0, describe(w, sock)

    # The worker did use the socket and the watchdog, so the variables were live in its environment.
    assert sock.with_line("READY=1") and sock.pings(), describe(w, sock)
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    leaked = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} & set(env)
    assert not leaked, leaked
    assert env["QUEUECTL_JOB_ID"] == "envjob" and env["QUEUECTL_TEST_MARKER"] == "kept"
    assert {m.pid for m in sock.messages} == {w.pid}  # the job (a child) sent nothing


def right_after_a_ping(sock: NotifySocket, proc, action, undo=None, max_lag: float = 0.3):
    """Run `action()` just after a fresh WATCHDOG=1 (within max_lag s); return (that ping's time, action's time).

    Right after a ping the worker sleeps a whole interval before its next heartbeat, so
    no heartbeat is in flight when the action lands. On a noisy machine the test may be
    late: then `undo()` (if given) and try again with the next ping.
    """
    for _ in range(20):
        seen = len(sock.pings())
        until_notified(lambda: len(sock.pings()) > seen, "a ping", proc, sock)
        ping = sock.pings()[-1]
        if time.monotonic() - ping > max_lag:
            continue
        action()
        done = time.monotonic()
        if done - ping <= max_lag or undo is None:
            return ping, done
        undo()
    raise AssertionError(f"could not act within {max_lag} s of a ping{describe(proc, sock)}")


def test_no_ping_while_the_heartbeat_cannot_be_written(db, run_cli, store, workers, notify_socket):
    configure(run_cli, ("poll-interval", "5"))  # the loop wakes only for heartbeats: each is its first write
    sock = notify_socket()
    w = spawn(workers, "--name", "lk", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "2000000"})
    until_notified(lambda: len(sock.pings()) >= 2, "two pings", w, sock)

    locker = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        # BEGIN EXCLUSIVE waits for a write in progress; then no one else can write.
        _, locked_at = right_after_a_ping(sock, w, lambda: locker.execute("BEGIN EXCLUSIVE"),
                                          undo=lambda: locker.execute("ROLLBACK"))
        time.sleep(3)  # the worker's next heartbeat (1 s after the ping) blocks on the lock
        released_at = time.monotonic()
    finally:
        if locker.in_transaction:
            locker.execute("ROLLBACK")
        locker.close()
    during = [p for p in sock.pings() if locked_at <= p <= released_at]
    assert len(during) <= 1, f"{len(during)} pings while the database was locked\n{sock.dump(locked_at)}"
    if during:  # only one already on its way when the lock was taken, not one for the blocked heartbeat
        assert during[0] - locked_at < 0.5, sock.dump(locked_at)

    until_notified(lambda: len([p for p in sock.pings() if p > released_at]) >= 2, "pings to resume", w, sock,
          since=locked_at)
    assert w.poll() is None
    assert store.worker_by_name("lk") is not None
    w.send_signal(signal.SIGTERM)
    assert exit_notified(w, sock) == 0


def test_worker_declared_dead_stops_pinging_and_exits_1(db, run_cli, store, workers, notify_socket):
    configure(run_cli, ("poll-interval", "5"))
    sock = notify_socket()
    w = spawn(workers, "--name", "gone", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "2000000"})
    until_notified(lambda: len(sock.pings()) >= 2, "two pings", w, sock)
    me = store.worker_by_name("gone")

    other = sqlite3.connect(db, timeout=30, isolation_level=None)  # as a recovering worker would
    try:
        def delete():
            assert other.execute("DELETE FROM workers WHERE id = ?", (me.id,)).rowcount == 1

        _, deleted_at = right_after_a_ping(sock, w, delete)
    finally:
        other.close()
    assert exit_notified(w, sock) == 1, describe(w, sock)
    after = [p for p in sock.pings() if p >= deleted_at]
    # At most one ping for a heartbeat written just before the delete, never one for the failed heartbeat.
    assert len(after) <= 1 and all(p - deleted_at < 0.5 for p in after), sock.dump(deleted_at)
    assert "declared dead" in WorkerProcs.output(w)


def test_watchdog_pid_of_another_process_means_no_pings(db, run_cli, store, workers, notify_socket):
    configure(run_cli, *FAST)  # heartbeats every 0.2 s
    sock = notify_socket()
    w = spawn(workers, "--name", "np", env={"NOTIFY_SOCKET": sock.address, "WATCHDOG_USEC": "1000000",
                                            "WATCHDOG_PID": str(os.getpid())})
    until_notified(ready(sock), "READY=1", w, sock)
    beats = set()

    def heartbeats() -> bool:
        row = store.worker_by_name("np")
        beats.add(row.heartbeat_at)
        return len(beats) >= 4

    until_notified(heartbeats, "three heartbeats after registration", w, sock)
    w.send_signal(signal.SIGTERM)
    assert exit_notified(w, sock) == 0
    assert sock.pings() == [], sock.dump()
    assert sock.with_line("READY=1") and sock.with_line("STOPPING=1")


# == queuectl.host.notify units =========================================================================


@pytest.mark.parametrize("environ, pid, expected", [
    ({}, None, None),
    ({"WATCHDOG_USEC": ""}, None, None),
    ({"WATCHDOG_USEC": "abc"}, None, None),
    ({"WATCHDOG_USEC": "1.5"}, None, None),
    ({"WATCHDOG_USEC": "0"}, None, None),
    ({"WATCHDOG_USEC": "-1000000"}, None, None),
    ({"WATCHDOG_USEC": "1000000"}, None, 0.5),
    ({"WATCHDOG_USEC": "30000000"}, None, 15.0),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "4242"}, 4242, 0.5),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "4242"}, 4243, None),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "abc"}, 4242, None),
    ({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": ""}, 4242, 0.5),  # empty counts as unset
    ({"WATCHDOG_USEC": "0", "WATCHDOG_PID": "4242"}, 4242, None),
    ({"WATCHDOG_PID": "4242"}, 4242, None),
])
def test_watchdog_interval(environ, pid, expected):
    assert watchdog_interval(environ, pid=pid) == expected


def test_watchdog_interval_defaults_to_this_process():
    env = {"WATCHDOG_USEC": "2000000"}
    assert watchdog_interval({**env, "WATCHDOG_PID": str(os.getpid())}) == 1.0
    assert watchdog_interval({**env, "WATCHDOG_PID": str(os.getppid())}) is None


def _socket_fds() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            out.add(fd)
    return out


@pytest.mark.parametrize("environ", [{}, {"NOTIFY_SOCKET": ""}, {"WATCHDOG_USEC": "1000000"}])
def test_notifier_without_notify_socket_is_a_noop(environ):
    before = _socket_fds()
    n = Notifier(environ)
    assert not n.enabled and n.watchdog_interval is None and n._sd is None
    n.ready("idle")
    n.status("busy")
    n.watchdog()
    n.stopping("draining")
    assert _socket_fds() == before  # no socket was created


def test_notifier_sends_to_a_real_socket(notify_socket, monkeypatch):
    sock = notify_socket()
    # sdnotify reads NOTIFY_SOCKET from os.environ itself, so set it there as systemd would.
    monkeypatch.setenv("NOTIFY_SOCKET", sock.address)
    monkeypatch.setenv("WATCHDOG_USEC", "4000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    n = Notifier()
    assert n.enabled and n.watchdog_interval == 2.0
    n.ready("idle")
    n.status("idle")  # unchanged: not sent
    n.status("busy")
    n.watchdog()
    n.stopping("draining 0 job(s)")
    sock.settle()
    assert [m.text for m in sock.messages] == [
        "READY=1\nSTATUS=idle", "STATUS=busy", "WATCHDOG=1", "STOPPING=1\nSTATUS=draining 0 job(s)"]
    assert {m.pid for m in sock.messages} == {os.getpid()}


# == journal priorities (queuectl.host.logsetup) ==================================================================


@pytest.mark.parametrize("level, prefix", [
    (logging.CRITICAL, "<2>"), (logging.ERROR, "<3>"), (logging.WARNING, "<4>"),
    (logging.INFO, "<6>"), (logging.DEBUG, "<7>"),
])
def test_priority_formatter_prefixes(level, prefix):
    record = logging.LogRecord("queuectl.worker", level, __file__, 1, "job %s done", ("x",), None)
    assert logsetup.PriorityFormatter("%(message)s").format(record) == f"{prefix}job x done"


def test_priority_formatter_prefixes_every_line():
    try:
        raise ValueError("boom")
    except ValueError:
        exc = sys.exc_info()
    record = logging.LogRecord("queuectl", logging.ERROR, __file__, 1, "first\nsecond", (), exc)
    lines = logsetup.PriorityFormatter("%(message)s").format(record).splitlines()
    assert lines[:2] == ["<3>first", "<3>second"]
    assert len(lines) > 3 and all(line.startswith("<3>") for line in lines)  # the traceback too
    assert lines[-1] == "<3>ValueError: boom"


def test_stderr_is_journal_compares_dev_and_inode(tmp_path):
    with open(tmp_path / "stream", "w") as f, open(tmp_path / "other", "w") as g:
        st, other = os.fstat(f.fileno()), os.fstat(g.fileno())
        assert logsetup.stderr_is_journal({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, f) is True
        for value in (f"{other.st_dev}:{other.st_ino}", f"{st.st_dev}:{st.st_ino + 1}",
                      f"{st.st_dev + 1}:{st.st_ino}", "", "garbage", "1:2:3", f"{st.st_dev}",
                      f"{st.st_dev}:", f":{st.st_ino}", "a:b"):
            assert logsetup.stderr_is_journal({"JOURNAL_STREAM": value}, f) is False, value
        assert logsetup.stderr_is_journal({}, f) is False
    with open(tmp_path / "stream") as f:  # the same file, another open: same dev:ino
        assert logsetup.stderr_is_journal({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, f) is True
    # A stream without a file descriptor is never the journal.
    assert logsetup.stderr_is_journal({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, io.StringIO()) is False


def test_configure_picks_the_format_from_journal_stream(tmp_path, monkeypatch):
    root = logging.getLogger("queuectl")
    saved = (root.handlers[:], root.level, root.propagate)
    try:
        with open(tmp_path / "log", "w") as f:
            st = os.fstat(f.fileno())
            monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
            logsetup.configure(f)
            logging.getLogger("queuectl.worker").warning("to the journal")
            monkeypatch.setenv("JOURNAL_STREAM", "0:0")
            logsetup.configure(f)
            logging.getLogger("queuectl.worker").info("to a terminal")
        lines = (tmp_path / "log").read_text().splitlines()
    finally:
        root.handlers[:], root.level, root.propagate = saved
    assert lines[0] == "<4>to the journal"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ queuectl-worker\[\d+\] INFO to a terminal", lines[1])


def test_worker_logs_with_priorities_when_stderr_is_the_journal(run_cli, workers):
    configure(run_cli, *FAST)
    enqueue(run_cli, id="fine", command="true")
    enqueue(run_cli, id="broken", command="exit 3", max_retries=0)
    w = spawn(workers, "--burst", "--name", "jw", journal=True)
    assert exit_notified(w) == 0, describe(w)
    lines = WorkerProcs.output(w).splitlines()
    assert "<6>worker jw started: 1 slot(s), queues (all)" in lines, lines
    assert "<6>job fine completed" in lines, lines
    assert "<4>job broken: dead: exit code 3 (attempt 1 of 1)" in lines, lines
    assert all(re.match(r"<[0-7]>\S", line) for line in lines if line), lines
    # journald adds the time and the process: the lines carry neither.
    assert not any(re.search(r"\d\d:\d\d:\d\d|queuectl-worker\[", line) for line in lines), lines


def test_worker_logs_timestamps_when_journal_stream_does_not_match(run_cli, workers):
    configure(run_cli, *FAST)
    enqueue(run_cli, id="fine", command="true")
    w = spawn(workers, "--burst", "--name", "tw", env={"JOURNAL_STREAM": "1:1"})  # stderr is a file, not that
    assert exit_notified(w) == 0, describe(w)
    lines = WorkerProcs.output(w).splitlines()
    assert any(re.fullmatch(r"\S+ \S+ queuectl-worker\[\d+\] INFO worker tw started: .*", line) for line in lines), lines
    assert not any(line.startswith("<") for line in lines), lines


# == --daemon ================================================================================================


@pytest.fixture
def daemons(db):
    """Teardown: kill any daemon worker a failed test left (known by its pidfile or its registration)."""
    pidfiles: list = []
    yield pidfiles
    pids = {p for p in map(read_pid, pidfiles) if p}
    with SqliteStore(db) as s:
        pids |= {w.pid for w in s.workers()}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"queuectl" in cmdline and b"--daemon" in cmdline and not gone(pid):  # one of this test's daemons
            os.kill(pid, signal.SIGKILL)


def start_daemon(db, pidfile, log_file, *extra: str, env: dict | None = None, cwd=None, timeout: float = 60):
    return subprocess.run(
        [*QUEUECTL, "--db", str(db), "worker", "start", "--daemon", "--pidfile", str(pidfile),
         "--log-file", str(log_file), *extra],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=clean_env(**(env or {})),
        cwd=cwd,
    )


def test_daemon_runs_jobs_and_worker_stop_stops_it(db, tmp_path, run_cli, store, daemons):
    configure(run_cli, *FAST)
    enqueue(run_cli, id="held", command=gate_command(tmp_path))
    pidfile, log = tmp_path / "run" / "w.pid", tmp_path / "w.log"
    pidfile.parent.mkdir()
    daemons.append(pidfile)

    r = start_daemon(db, pidfile, log, "--name", "d1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""
    # It returned while its job still runs (the job waits for a file the test has not made yet).
    row = wait_for(lambda: store.worker_by_name("d1"), message="the daemon to register")
    wait_for(lambda: read_pid(pidfile), message="the pidfile")
    assert read_pid(pidfile) == row.pid and not gone(row.pid)
    wait_for(lambda: store.get_job("held").state == JobState.PROCESSING, message="the job to start")
    (tmp_path / "go").touch()
    wait_for(lambda: store.get_job("held").state == JobState.COMPLETED, message="the daemon to finish the job")
    # A second job, enqueued after the daemon started, also runs.
    enqueue(run_cli, id="later", command="true")
    wait_for(lambda: store.get_job("later").state == JobState.COMPLETED, message="the second job")

    stop = queuectl(db, "worker", "stop", "--timeout", "30", env=clean_env())
    assert stop.stdout.strip() == f"d1 (pid {row.pid}): stopped", stop.stdout + stop.stderr
    assert gone(row.pid)
    wait_for(lambda: not pidfile.exists(), timeout=10, message="the pidfile to be removed")
    assert store.worker_by_name("d1") is None
    text = log.read_text()
    assert "worker d1 started" in text and "job held completed" in text and "worker d1 stopped" in text, text
    assert not text.startswith("<")  # a log file is not the journal: plain timestamped lines


def test_daemon_with_relative_paths_keeps_their_files(db, tmp_path, run_cli, store, daemons):
    # The daemon changes its directory to /: relative --db, --pidfile and --log-file must still
    # name the files they named where the command was typed.
    configure(run_cli, *FAST)
    enqueue(run_cli, id="rel", command="true")
    assert os.path.dirname(db) == str(tmp_path)
    daemons.append(tmp_path / "w.pid")
    wrong = [f"/{os.path.basename(db)}{suffix}" for suffix in ("", "-wal", "-shm")]  # relative to /
    preexisting = {p for p in wrong if os.path.exists(p)}
    try:
        r = start_daemon(os.path.basename(db), "w.pid", "w.log", "--name", "d5", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: store.get_job("rel").state == JobState.COMPLETED, message="the daemon to run the job")
    finally:
        made = [p for p in wrong if p not in preexisting and os.path.exists(p)]
        for p in made:  # a daemon that lost the directory made its database in /
            os.unlink(p)
    assert not made, made
    row = store.worker_by_name("d5")
    assert row is not None and read_pid(tmp_path / "w.pid") == row.pid
    stop = queuectl(db, "worker", "stop", "d5", "--timeout", "30", env=clean_env())
    assert "stopped" in stop.stdout
    wait_for(lambda: not (tmp_path / "w.pid").exists(), timeout=10, message="the pidfile to be removed")
    assert "job rel completed" in (tmp_path / "w.log").read_text()


@pytest.mark.parametrize("option", ["--pidfile", "--log-file"])
def test_daemon_refuses_an_unwritable_directory(db, tmp_path, store, daemons, option):
    paths = {"--pidfile": tmp_path / "w.pid", "--log-file": tmp_path / "w.log"}
    paths[option] = tmp_path / "missing" / "file"
    daemons.append(paths["--pidfile"])
    r = start_daemon(db, paths["--pidfile"], paths["--log-file"], "--name", "d6")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "missing" in r.stderr, r.stderr
    assert store.worker_by_name("d6") is None


def test_daemon_refuses_notify_socket(db, tmp_path, store, daemons):
    pidfile = tmp_path / "w.pid"
    daemons.append(pidfile)
    r = start_daemon(db, pidfile, tmp_path / "w.log", "--name", "d2", env={"NOTIFY_SOCKET": "@queuectl-none"})
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "--daemon" in r.stderr and "NOTIFY_SOCKET" in r.stderr, r.stderr
    assert not pidfile.exists() and store.worker_by_name("d2") is None


def test_daemon_replaces_a_stale_pidfile(db, tmp_path, run_cli, store, daemons):
    configure(run_cli, *FAST)
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    pidfile, log = tmp_path / "w.pid", tmp_path / "w.log"
    pidfile.write_text(f"{gone.pid}\n")
    daemons.append(pidfile)

    r = start_daemon(db, pidfile, log, "--name", "d3")
    assert r.returncode == 0, r.stderr
    row = wait_for(lambda: store.worker_by_name("d3"), message="the daemon to register")
    wait_for(lambda: read_pid(pidfile) == row.pid, message="the pidfile to hold the daemon's pid")
    assert row.pid != gone.pid
    stop = queuectl(db, "worker", "stop", "d3", "--timeout", "30", env=clean_env())
    assert "stopped" in stop.stdout
    wait_for(lambda: not pidfile.exists(), timeout=10, message="the pidfile to be removed")


def test_daemon_refuses_a_pidfile_of_a_live_process(db, tmp_path, store, daemons):
    pidfile, log = tmp_path / "w.pid", tmp_path / "w.log"
    pidfile.write_text(f"{os.getpid()}\n")  # this test process is alive
    daemons.append(pidfile)
    r = start_daemon(db, pidfile, log, "--name", "d4")
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "running process" in r.stderr, r.stderr
    assert read_pid(pidfile) == os.getpid()  # left alone
    assert store.worker_by_name("d4") is None and not log.exists()


# == configuration from the environment ==========================================================================


@pytest.mark.parametrize("value", ["0", "abc", "-1"])
def test_worker_count_from_environment_is_a_configuration_error(db, value):
    r = queuectl(db, "worker", "start", "--burst", check=False, env=clean_env(QUEUECTL_WORKER_COUNT=value))
    assert r.returncode == 78, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "environment" in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["0", "abc"])
def test_worker_count_option_is_a_usage_error(db, value):
    r = queuectl(db, "worker", "start", "--burst", "--count", value, check=False, env=clean_env())
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr


def test_worker_queues_from_environment(db, run_cli, store, workers):
    configure(run_cli, *FAST)
    for queue in ("a", "b", "c", "default"):
        enqueue(run_cli, id=f"in-{queue}", command="true", queue=queue)
    w = spawn(workers, "--burst", "--name", "qa", env={"QUEUECTL_WORKER_QUEUES": "a b"})
    assert exit_notified(w) == 0, describe(w)
    states = {q: store.get_job(f"in-{q}").state for q in ("a", "b", "c", "default")}
    assert states == {"a": JobState.COMPLETED, "b": JobState.COMPLETED,
                      "c": JobState.PENDING, "default": JobState.PENDING}
    assert "queues a,b" in WorkerProcs.output(w)


def test_database_in_a_missing_directory_from_environment(tmp_path):
    path = str(tmp_path / "missing" / "queue.db")
    r = subprocess.run([*QUEUECTL, "worker", "start", "--burst"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL, env=clean_env(QUEUECTL_DB=path))
    assert r.returncode == 78, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "QUEUECTL_DB" in r.stderr and "does not exist" in r.stderr, r.stderr
    # The same path as an option is bad input, not a configuration error.
    r = subprocess.run([*QUEUECTL, "--db", path, "worker", "start", "--burst"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL, env=clean_env())
    assert r.returncode == 2, r.stderr
    assert not (tmp_path / "missing").exists()


def test_a_bad_queue_list_from_the_environment_is_a_configuration_error(db, workers):
    w = workers.start("--burst", env={"QUEUECTL_WORKER_QUEUES": "good bad/q"})
    assert w.wait(30) == 78
    out = WorkerProcs.output(w)
    assert out.count("\n") == 1 and "QUEUECTL_WORKER_QUEUES" in out and "bad/q" in out, out
    cli_side = queuectl(db, "worker", "start", "--burst", "--queue", "bad/q", check=False)
    assert cli_side.returncode == 2


@pytest.mark.parametrize("variable,value,fragment", [("QUEUECTL_WORKER_NAME", "a b", "worker name"),
                                                      ("QUEUECTL_WORKER_COUNT", "99999999999", "1<=x<=1000")])
def test_a_bad_name_or_count_from_the_environment_is_a_configuration_error(db, variable, value, fragment):
    """The unit sets QUEUECTL_WORKER_NAME=%i: an instance name that is no worker name must not restart forever."""
    r = subprocess.run([*QUEUECTL, "--db", db, "worker", "start", "--burst"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL, env=clean_env(**{variable: value}))
    assert r.returncode == 78, r.stderr
    assert r.stderr.count("\n") == 1 and fragment in r.stderr and r.stdout == "", r.stderr


def test_start_up_errors_reach_the_journal_as_errors(db, tmp_path):
    log = tmp_path / "journal-standin"
    with open(log, "wb") as f:
        st = os.fstat(f.fileno())
        r = subprocess.run([*QUEUECTL, "--db", db, "worker", "start", "--count", "0"], stderr=f,
                           env={**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, timeout=60)
    assert r.returncode == 2
    assert log.read_text().startswith("<3>queuectl: error: ")
