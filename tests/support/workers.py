"""Real `queuectl worker start` processes for a test (the `workers` fixture's), and nothing of theirs left
behind; waiting on them with their logs in the failure (until, wait_exit); the short timings the processes
tier runs them with (FAST, configure_fast)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from typing import Callable, Sequence

from queuectl.domain.models import JobState
from queuectl.host import procs
from support.cli import QUEUECTL, configure, enqueue
from support.waiting import wait_for


class WorkerProcs:
    """Start `queuectl worker start` processes, each in its own session; kill leftovers at teardown."""

    def __init__(self, db: str, tmp_path):
        self.db = db
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []
        # Every worker started here, and so every job it runs, carries this in its environment: the
        # jobs' own process groups outlive a SIGKILL of their worker's session, and are found by it.
        self.mark = f"QUEUECTL_TEST_WORKERS={uuid.uuid4().hex}"

    def start(self, *args: str, env: dict | None = None, wrapper: Sequence[str] = ()) -> subprocess.Popen:
        """Start `queuectl worker start ARGS`, through `wrapper` (a command that execs its arguments) if given."""
        log = open(self.tmp_path / f"worker-{len(self.procs)}.log", "w+b")
        proc = subprocess.Popen(
            [*wrapper, *QUEUECTL, "--db", self.db, "worker", "start", *args],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **(env or {}), "QUEUECTL_TEST_WORKERS": self.mark.split("=", 1)[1]},
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
        """Kill the workers still running and every job process they left (a test that ends with a job
        still waiting must not leave it running for ever)."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            p.log.close()
        for pgid in procs.groups_with_env(self.mark.encode()):
            procs.kill_and_wait(pgid)


#: Short timings for every test; later pairs override earlier ones (heartbeat first: stale-after > 2 x heartbeat).
FAST = (("heartbeat-interval", "0.2"), ("poll-interval", "0.05"), ("stale-after", "1.5"), ("backoff-base", "1"))


def configure_fast(run_cli, *extra: tuple[str, str]) -> None:
    """Set the fast timings (FAST), then `extra`."""
    configure(run_cli, *FAST, *extra)


def worker_logs(procs) -> str:
    return "".join(f"\n--- worker pid {p.pid} log ---\n{WorkerProcs.output(p)}" for p in procs)


def until(predicate, what: str, timeout: float = 30.0, procs=(), more: Callable[[], str] = str):
    """wait_for, adding the logs of the workers `procs` and `more()` to the failure message."""
    try:
        return wait_for(predicate, timeout=timeout, message=what)
    except AssertionError as e:
        raise AssertionError(f"{e}{worker_logs(procs)}{more()}") from None


def wait_exit(proc, timeout: float = 30.0, more: Callable[[], str] | None = None) -> int:
    """The worker's exit code once it exits; fail after `timeout` seconds with its log (or `more()`)."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker pid {proc.pid} did not exit within {timeout} s"
                             f"{more() if more else worker_logs([proc])}") from None


def state_is(store, job_id: str, *states: JobState):
    return lambda: store.get_job(job_id).state in states


def read_pid(path) -> int | None:
    """The pid in the file `path`, or None while there is none (no file, or not a whole number yet)."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def start_sleeping_job(run_cli, workers, tmp_path):
    """Enqueue job "j" (it writes its shell's pid, then sleeps 30 s) and start worker "w" on it.

    Return (the worker process, the job's pgid) once the job runs.
    """
    configure_fast(run_cli)
    enqueue(run_cli, id="j", command=f"echo $$ > {safe_path(tmp_path / 'pid')}; sleep 30")
    w = workers.start("--name", "w")
    return w, until(lambda: read_pid(tmp_path / "pid"), "the job to start", procs=[w])


def safe_path(path) -> str:
    """The path as shell text; these tests only use paths that need no quoting."""
    text = str(path)
    assert re.fullmatch(r"[\w/.+-]+", text), text
    return text
