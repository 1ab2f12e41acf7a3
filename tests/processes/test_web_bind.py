"""Where `queuectl web` listens, judged on addresses and never on names: a bind whose host name (or
"localhost") resolves beyond loopback is refused without users (exit 78, nothing made), a name that
resolves to loopback is served on the address checked, and a socket systemd passed is judged on its
bound address.

Name resolution is real: each `queuectl web` runs in a mount namespace of its own (unshare(1)) where
this test's hosts file is bind-mounted over /etc/hosts (and an nsswitch.conf of files alone), so
glibc's resolver gives the names this test chooses, and no others. systemd's passed socket comes from systemd-socket-activate(1).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from support.cli import QUEUECTL
from support.suite import require
from support.waiting import wait_for
from support.pgserver import free_port

HOSTS = """127.0.0.1 near.test
10.1.2.3 exposed.test
127.0.0.1 mixed.test
10.1.2.3 mixed.test
10.1.2.3 localhost
"""


def _unshare_missing() -> str | None:
    if shutil.which("unshare") is None:
        return "needs unshare(1)"
    probe = subprocess.run(["unshare", "--mount", "--map-root-user", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"cannot make a mount namespace: {probe.stderr.strip()}"


@pytest.fixture
def resolving(tmp_path):
    """The argv prefix that runs a command with HOSTS as its /etc/hosts."""
    require(_unshare_missing(), "processes")
    hosts, nsswitch = tmp_path / "hosts", tmp_path / "nsswitch.conf"
    hosts.write_text(HOSTS)
    nsswitch.write_text("hosts: files\n")  # no DNS: a name not in HOSTS resolves to nothing, at once
    return ["unshare", "--mount", "--map-root-user", "sh", "-c",
            f'mount --bind {hosts} /etc/hosts && mount --bind {nsswitch} /etc/nsswitch.conf && exec "$@"', "sh"]


def run_web(resolving, db: str, bind: str) -> subprocess.CompletedProcess:
    """`queuectl web --bind BIND` on `db` through `resolving`, to its end."""
    return subprocess.run([*resolving, *QUEUECTL, "--db", db, "web", "--bind", bind], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})


@pytest.mark.parametrize("name, address", [("exposed.test", "10.1.2.3"), ("mixed.test", "10.1.2.3"),
                                           ("localhost", "10.1.2.3")])
def test_a_name_that_resolves_beyond_loopback_is_refused(resolving, db, name, address):
    done = run_web(resolving, db, f"{name}:{free_port()}")
    assert done.returncode == 78 and done.stdout == "", done
    assert done.stderr.startswith(f"queuectl: error: refusing to listen on {name} ({address}) without users:"), done
    assert len(done.stderr.splitlines()) == 1
    assert not Path(db).exists()


def test_a_name_that_resolves_to_nothing_is_one_line(resolving, db):
    port = free_port()
    done = run_web(resolving, db, f"nowhere.test:{port}")
    assert done.returncode == 78 and done.stdout == "", done
    assert done.stderr.startswith(f"queuectl: error: cannot listen on nowhere.test:{port}: "), done
    assert len(done.stderr.splitlines()) == 1
    assert not Path(db).exists()


def test_a_name_that_resolves_to_loopback_is_served_on_the_address_checked(resolving, db, tmp_path):
    port = free_port()
    log = tmp_path / "web.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*resolving, *QUEUECTL, "--db", db, "web", "--bind", f"near.test:{port}"],
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    try:
        wait_for(lambda: "Booting worker" in log.read_text() or proc.poll() is not None, message="the dashboard")
        assert proc.poll() is None, log.read_text()
        assert f"serving the dashboard on http://127.0.0.1:{port}/" in log.read_text()
        assert "Listening at: http://127.0.0.1:" in log.read_text()  # gunicorn bound the number, not the name
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()


def test_a_socket_systemd_passed_beyond_loopback_is_refused(db):
    activate = shutil.which("systemd-socket-activate")
    require(None if activate else "needs systemd-socket-activate(1) (package systemd)", "processes")
    port = free_port()
    proc = subprocess.Popen([activate, "-l", f"0.0.0.0:{port}", "-E", f"PYTHONPATH={Path(__file__).parents[2]}",
                             *QUEUECTL, "--db", db, "web"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def knock():  # the service starts at the first connection, as systemd starts it
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    try:
                        return s.recv(100) or "closed"
                    except ConnectionResetError:
                        return "reset"
            except ConnectionRefusedError:
                return None  # not listening yet
        assert wait_for(knock, message="systemd-socket-activate to listen") in ("closed", "reset")
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 78, err
    assert "queuectl: error: refusing to listen on 0.0.0.0 without users:" in err
    assert not Path(db).exists()
