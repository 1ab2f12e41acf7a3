"""queuectl's commands from a test: in-process through Click (Cli, the `run_cli` fixture's; it works on
Debian's Click 8.1 and PyPI's newer Click) or as real processes (queuectl, timed; a dead job made so, dead_job;
a command that waits, read while it runs, Waiter), what a command that worked prints (assert_ok, parse_metrics
for `queuectl metrics`), and the one shape of an error every bad input gets (assert_error)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import time

from click.testing import CliRunner

from queuectl.cli import cli


def json_error_position(text: str) -> str:
    """Where this Python's json module says `text` breaks: "column C" on line 1, else "line L column C".

    Tests assert the position queuectl reports against this, not one Python release's wording:
    Python 3.13 puts a trailing comma's error one column before 3.11 does.
    Raises AssertionError if `text` is valid JSON.
    """
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return f"column {e.colno}" if e.lineno == 1 else f"line {e.lineno} column {e.colno}"
    raise AssertionError(f"{text!r} is valid JSON")


def assert_ok(result) -> str:
    """Exit 0; return stdout."""
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


def assert_error(result, code: int, *fragments: str) -> str:
    """One line on stderr, 'queuectl: error: ...', exit `code`, nothing on stdout; return the line."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stderr.endswith("\n")
    line = lines[0]
    assert line.startswith("queuectl: error: "), line
    assert "Traceback" not in line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


def assert_process_error(r: subprocess.CompletedProcess, code: int) -> str:
    """assert_error for a real process: exit `code`, nothing on stdout, one 'queuectl: error: ...' line on
    stderr; return stderr."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("queuectl: error: "), r.stderr
    return r.stderr


def _cli_runner() -> CliRunner:
    # Click 8.2 removed mix_stderr (stderr is always apart); 8.1 mixes unless told not to.
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)
    return CliRunner()


class Cli:
    """Run queuectl commands in-process against one database (None: no --db); returns Click's Result."""

    def __init__(self, db: str | None):
        self.db = db
        self.runner = _cli_runner()

    def __call__(self, *args: str, input: str | bytes | None = None, env: dict | None = None):
        db = ["--db", self.db] if self.db is not None else []
        return self.runner.invoke(cli, [*db, *args], input=input, env=env, catch_exceptions=False)

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


def parse_metrics(text: str) -> dict:
    """`queuectl metrics` output read by a real Prometheus parser (prometheus_client's): {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


QUEUECTL = [sys.executable, "-m", "queuectl"]


def queuectl(db: str, *args: str, check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run `python -m queuectl --db DB ARGS` as a real process."""
    proc = subprocess.run([*QUEUECTL, "--db", db, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"queuectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def timed(db: str, *args: str, timeout: float = 60, **kw) -> tuple[subprocess.CompletedProcess, float]:
    """queuectl(..., check=False): the process, and the seconds it took."""
    began = time.monotonic()
    proc = queuectl(db, *args, check=False, timeout=timeout, **kw)
    return proc, time.monotonic() - began


def status(db: str) -> dict:
    """`queuectl status --json` as a real process, parsed."""
    return json.loads(queuectl(db, "status", "--json").stdout)


def shown(db: str, job_id: str) -> dict:
    """`queuectl show JOB_ID --json` as a real process, parsed: the job as the CLI shows it."""
    return json.loads(queuectl(db, "show", job_id, "--json").stdout)


def enqueued(db: str, **job) -> str:
    """`queuectl enqueue JSON` as a real process; return the job's id."""
    return queuectl(db, "enqueue", json.dumps(job)).stdout.strip()


def dead_job(db: str, **job) -> str:
    """A job of `job` (the enqueue JSON's fields; command "exit 3" unless given, which must fail) with no retry,
    run by a burst worker, as real processes: dead. Return its id."""
    job_id = enqueued(db, max_retries=0, **{"command": "exit 3", **job})
    queuectl(db, "worker", "start", "--burst")
    assert shown(db, job_id)["state"] == "dead"
    return job_id


class Waiter:
    """A queuectl command (`wait`, `logs -f`, `enqueue --wait`, ...) run to its end as a process of its own session,
    with `env`, its stdout and stderr in files of their own (read while it runs); `name` names them."""

    def __init__(self, db: str, tmp_path, name: str, *args: str, env: dict | None = None):
        self.name = name
        self.out_path, self.err_path = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*QUEUECTL, "--db", db, *args], stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, **(env or {})})

    def out(self) -> str:
        return self.out_path.read_text()

    def err(self) -> str:
        return self.err_path.read_text()

    def finish(self, timeout: float = 180) -> int:
        """Its exit status, once it has exited (killed after `timeout` seconds: the test fails)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} still running after {timeout} s: {self.err()}") from None

    def result(self, timeout: float) -> tuple[int | None, str, str]:
        """(exit code, stdout, stderr) once it exits, within `timeout` seconds; exit code None if it did not."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        return code, self.out(), self.err()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __repr__(self) -> str:
        return f"{self.name}: exit {self.proc.poll()}, stdout {self.out()!r}, stderr {self.err()!r}"
