"""Shared fixtures: a database path, a Click runner that works on Click 8.1 and 8.2+, and worker processes."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from queuectl.cli import cli
from queuectl.store import SqliteStore


@pytest.fixture
def db(tmp_path) -> str:
    """Path of a fresh database file (created on first use)."""
    return str(tmp_path / "queue.db")


@pytest.fixture
def store(db):
    s = SqliteStore(db)
    yield s
    s.close()


def _cli_runner() -> CliRunner:
    # Click 8.2 removed mix_stderr (stderr is always apart); 8.1 mixes unless told not to.
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)
    return CliRunner()


class Cli:
    """Run queuectl commands in-process against one database; returns Click's Result."""

    def __init__(self, db: str):
        self.db = db
        self.runner = _cli_runner()

    def __call__(self, *args: str, input: str | bytes | None = None, env: dict | None = None):
        return self.runner.invoke(cli, ["--db", self.db, *args], input=input, env=env, catch_exceptions=False)

    def json(self, *args: str):
        result = self(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)


def configure(run_cli: Cli, *pairs: tuple[str, str]) -> None:
    """`queuectl config set KEY VALUE` for each pair; each must succeed."""
    for key, value in pairs:
        r = run_cli("config", "set", key, value)
        assert r.exit_code == 0, r.stderr


def enqueue(run_cli: Cli, **job) -> str:
    """`queuectl enqueue JSON`; return the job's id."""
    r = run_cli("enqueue", json.dumps(job))
    assert r.exit_code == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture
def run_cli(db) -> Cli:
    return Cli(db)


# Tests never read the host's /etc/queuectl/queuectl.conf (their own processes inherit this too).
os.environ["QUEUECTL_CONFIG"] = ""

QUEUECTL = [sys.executable, "-m", "queuectl"]


def queuectl(db: str, *args: str, check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run `python -m queuectl --db DB ARGS` as a real process."""
    proc = subprocess.run([*QUEUECTL, "--db", db, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"queuectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


class WorkerProcs:
    """Start `queuectl worker start` processes, each in its own session; kill leftovers at teardown."""

    def __init__(self, db: str, tmp_path):
        self.db = db
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.tmp_path / f"worker-{len(self.procs)}.log", "w+b")
        proc = subprocess.Popen(
            [*QUEUECTL, "--db", self.db, "worker", "start", *args],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **(env or {})},
        )
        proc.log = log
        self.procs.append(proc)
        return proc

    @staticmethod
    def output(proc) -> str:
        proc.log.flush()
        proc.log.seek(0)
        return proc.log.read().decode(errors="replace")

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            p.log.close()


@pytest.fixture
def workers(db, tmp_path):
    w = WorkerProcs(db, tmp_path)
    yield w
    w.cleanup()


def require(reason: str | None, tier: str) -> None:
    """Skip with `reason` (a missing prerequisite), or fail under CI (CI=true), where every tier is mandatory."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the {tier} tier cannot run in CI: {reason}")
    pytest.skip(reason)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, message: str = "condition"):
    """Poll `predicate` until it returns a truthy value; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)
