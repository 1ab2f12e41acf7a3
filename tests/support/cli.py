"""queuectl's commands from a test: in-process through Click (Cli, the `run_cli` fixture's; it works on
Debian's Click 8.1 and PyPI's newer Click) or as real processes (queuectl), and the one shape of an error
every bad input gets (assert_error)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

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


QUEUECTL = [sys.executable, "-m", "queuectl"]


def queuectl(db: str, *args: str, check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run `python -m queuectl --db DB ARGS` as a real process."""
    proc = subprocess.run([*QUEUECTL, "--db", db, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"queuectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def status(db: str) -> dict:
    """`queuectl status --json` as a real process, parsed."""
    return json.loads(queuectl(db, "status", "--json").stdout)


def shown(db: str, job_id: str) -> dict:
    """`queuectl show JOB_ID --json` as a real process, parsed: the job as the CLI shows it."""
    return json.loads(queuectl(db, "show", job_id, "--json").stdout)
