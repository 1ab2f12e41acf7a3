"""Fixtures of the processes tier alone (the fixtures every tier shares are in tests/conftest.py)."""

from __future__ import annotations

import os
import signal

from urllib.parse import unquote

import pytest

from support.suite import require, require_postgres
from support.pgbouncer import PgBouncer
from support.webserver import WebServer, users_file


def _queuectl_children() -> list[int]:
    """Pids of this process's live children that run queuectl (`python -m queuectl ...`)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if int(fields[1]) == os.getpid() and fields[0] not in (b"Z", b"X") and b"queuectl" in argv:
            found.append(int(name))
    return found


@pytest.fixture(autouse=True)
def no_command_left_running():
    """Kill the queuectl commands a test started and left running (a test that failed while one waited:
    otherwise it would wait on, for ever, after the suite). Workers are WorkerProcs' to stop."""
    yield
    for pid in _queuectl_children():
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@pytest.fixture
def users(tmp_path) -> str:
    """A users file of support.webserver.USERS."""
    return users_file(tmp_path / "web-users")


@pytest.fixture
def web(db, tmp_path):
    """Start `queuectl web` on `db` (support.webserver.WebServer's arguments); each is stopped at the end and must
    exit 0 within bounds."""
    started = []

    def start(*args, **kw) -> WebServer:
        server = WebServer(db, tmp_path, *args, **kw)
        started.append(server)
        return server.start()

    yield start
    try:
        for server in started:
            server.stop()
    finally:
        for server in started:
            server.kill()  # those a failed stop left


@pytest.fixture(scope="module")
def bouncer(pg_server):
    """A PgBouncer in transaction pooling in front of the session's server (tests/support/pgbouncer.py)."""
    require_postgres()
    require(PgBouncer.missing(), "pgbouncer")
    b = PgBouncer(pg_server, pool_mode="transaction", pool_size=2).start()
    yield b
    b.stop()


@pytest.fixture
def pooled(pg_uri, bouncer) -> str:
    """The fresh database of pg_uri, through the pooler."""
    return bouncer.uri(unquote(pg_uri.rsplit("/", 1)[1]))
