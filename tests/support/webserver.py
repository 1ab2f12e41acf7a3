"""`queuectl web` as a real process for tests: the venv's queuectl on a free loopback port, against a real
SQLite file or PostgreSQL database, waited for until it answers (polled, never a fixed sleep), stopped with
SIGTERM and required to exit 0 within STOP_TIMEOUT seconds. Its stderr (gunicorn's log, queuectl's
lines) is kept in a file and shown in failure messages.

Users files are made here too (`users_file`): bcrypt hashes at bcrypt's lowest cost, so that making
one takes milliseconds; the dashboard checks them as any other.
"""

from __future__ import annotations

import base64
import http.client
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from support.pgserver import free_port

#: Seconds `queuectl web` may take to answer its first request, and to exit after SIGTERM.
START_TIMEOUT, STOP_TIMEOUT = 30.0, 15.0
#: The users every dashboard a test starts with users knows: name -> (role, password).
USERS = {"olga": ("operator", "olga-secret"), "victor": ("viewer", "victor-secret")}
#: What a dead job's command (and output) holds in the host name tests: no refused answer may show it.
SECRET = "s3cr3t-token"


def users_file(path: Path, users: dict[str, tuple[str, str]] = USERS) -> str:
    """Write a users file of `users` (name -> (role, password)) at `path`; return its path."""
    import bcrypt

    lines = [f"{name}:{role}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()}"
             for name, (role, password) in users.items()]
    path.write_text("# made by tests/support/webserver.py\n" + "\n".join(lines) + "\n")
    return str(path)


class WebServer:
    """`queuectl --db DB web --bind 127.0.0.1:PORT ARGS`, started by `start` and stopped by `stop`; `url`
    is its base address with the prefix and no trailing slash ("http://127.0.0.1:PORT/q/p")."""

    def __init__(self, db: str, tmp_path: Path, *args: str, prefix: str = "", users: str | None = None,
                 read_only: bool = False, interval: str = "1", host: str = "127.0.0.1"):
        self.db = db
        self.port = free_port()
        self.prefix = prefix
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = self.origin + prefix
        self.argv = [sys.executable, "-m", "queuectl", "--db", db, "web", "--bind", f"{host}:{self.port}",
                     "--interval", interval, *(["--url-prefix", prefix] if prefix else []),
                     *(["--users", users] if users else []), *(["--read-only"] if read_only else []), *args]
        self.log_path = tmp_path / f"web-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def log(self) -> str:
        """What the server wrote on stderr and stdout so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self) -> "WebServer":
        """Start the server and return once it answers HTTP (any status); raises AssertionError with its log
        if it exits first or does not answer within START_TIMEOUT seconds."""
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not self.answers():
            if self.proc.poll() is not None:
                raise AssertionError(f"queuectl web exited {self.proc.returncode} before answering:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"queuectl web did not answer within {START_TIMEOUT:g} s:\n{self.log()}")
            time.sleep(0.05)
        return self

    def answers(self) -> bool:
        """Whether an HTTP request to the server gets an answer (whatever its status)."""
        try:
            with urllib.request.urlopen(self.url + "/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM, group: bool = False) -> None:
        """Send `sig` to the server (`group`: to its whole session, as a terminal's hangup does); raise
        AssertionError unless it exits 0 within STOP_TIMEOUT seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return self._check_exit()
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"queuectl web did not exit within {STOP_TIMEOUT:g} s of {signal.Signals(sig).name}:"
                                 f"\n{self.log()}")
        self._check_exit()

    def _check_exit(self) -> None:
        if self.proc is not None and self.proc.returncode != 0:
            raise AssertionError(f"queuectl web exited {self.proc.returncode}:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL the server's session (gunicorn's arbiter and worker) if it still runs."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def request(url: str, method: str = "GET", user: str | None = None, form: dict | None = None,
            headers: dict | None = None) -> tuple[int, dict, str]:
    """Send one HTTP request (redirects not followed) as `user` of USERS (None: no credentials), `form` as
    the urlencoded body; return (status, headers with lower-case names, body as text)."""
    parts = urlsplit(url)
    sent = dict(headers or {})
    if user is not None:
        credentials = f"{user}:{USERS[user][1]}".encode()
        sent["Authorization"] = "Basic " + base64.b64encode(credentials).decode()
    body = None
    if form is not None:
        body = urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body, sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        connection.close()
