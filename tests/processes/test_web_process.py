"""`queuectl web` as a process: in the foreground it stops on SIGTERM, SIGINT and SIGHUP (a closed terminal or
SSH session), whether the signal goes to its main process or to its whole session (as a terminal's hangup does):
exit 0, nothing of it left running; an address in use is one line, exit 1."""

import signal
import socket
import subprocess
import sys
import time

import pytest

from support.webserver import WebServer


def session_processes(sid: int) -> list[int]:
    """The pids of the processes still in session `sid`."""
    out = subprocess.run(["ps", "-o", "pid=", "-s", str(sid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize("group", [False, True], ids=["main", "session"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_the_dashboard(tmp_path, sig, group):
    server = WebServer(str(tmp_path / "q.db"), tmp_path).start()
    try:
        sid = server.proc.pid
        assert len(session_processes(sid)) == 2  # gunicorn's arbiter and its one worker
        server.stop(sig, group=group)
        deadline = time.monotonic() + 10
        while session_processes(sid) and time.monotonic() < deadline:  # the worker, reaped by the arbiter
            time.sleep(0.05)
        assert session_processes(sid) == []
        assert "reload" not in server.log().lower() and "Booting worker" in server.log()
    finally:
        server.kill()


def test_an_address_in_use_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "queuectl", "--db", str(tmp_path / "q.db"), "web", "--bind",
                               f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == f"queuectl: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
