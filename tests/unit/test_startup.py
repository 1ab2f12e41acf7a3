"""Lean start-up: `queuectl enqueue` imports only what it runs (issue 26), checked in a new process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from queuectl.cli import cli

#: What enqueueing into a SQLite database must not import: the worker and what runs jobs, PostgreSQL's
#: driver and store, the api of other commands, Click commands it does not run, and what those bring.
NOT_FOR_ENQUEUE = {"queuectl.worker", "queuectl.host.runner", "queuectl.host.notify", "psycopg",
                   "queuectl.store.postgres", "queuectl.api.ops", "queuectl.api.status", "queuectl.api.schedules",
                   "queuectl.api.snapshot", "queuectl.api.metrics", "queuectl.cli.worker", "queuectl.cli.ops",
                   "queuectl.cli.jobs", "queuectl.cli.status", "queuectl.api.waiting", "queuectl.api.following",
                   "queuectl.cli.waiting", "queuectl.api.starting",
                   "queuectl.cli.dlq", "queuectl.cli.schedules", "queuectl.cli.limits", "queuectl.cli.config",
                   "queuectl.host.control", "queuectl.host.units", "configparser", "subprocess", "socket",
                   # what only schedules, workers and type checks need, and what commands' records avoid
                   # (NamedTuples, not dataclasses: see queuectl.domain.models)
                   "queuectl.domain.recurrence", "zoneinfo", "croniter", "queuectl.store.interface",
                   "queuectl.store.request", "dataclasses", "signal", "grp", "_socket"}


def imported_by(*args: str, env: dict | None = None) -> set[str]:
    script = ("import atexit, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr));"
              "from queuectl.cli import main; main()")
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return set(r.stderr.split())


def test_enqueue_imports_neither_the_worker_nor_postgresql_nor_other_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("QUEUECTL_CONFIG", "")
    imported = imported_by("--db", str(tmp_path / "q.db"), "enqueue", '{"command":"true"}')
    assert {"queuectl.api.jobs", "queuectl.cli.enqueue", "queuectl.store.sqlite"} <= imported
    # What the baseline of the start-up figure imports by itself (grp, on Python 3.13) is not queuectl's doing.
    baseline = subprocess.run([sys.executable, "-c", "import sys, click, sqlite3, json; print(*sys.modules)"],
                              capture_output=True, text=True, timeout=60, check=True).stdout.split()
    added = (imported & NOT_FOR_ENQUEUE) - set(baseline)
    assert not added, sorted(added)


@pytest.mark.parametrize("args", [["--help"], ["--version"], *([c, "--help"] for c in (
    "enqueue", "list", "show", "logs", "wait", "config", "schedule"))])  # as queuectl's docstring says
def test_help_and_version_open_no_store(args):
    imported = imported_by(*args)
    assert not {m for m in imported if m.startswith("queuectl.store")}, sorted(imported)


@pytest.mark.parametrize("args, loaded", [(["--help"], set()), (["worker", "--help"], {"queuectl.cli.worker"})])
def test_a_groups_help_lists_its_commands_without_importing_them(args, loaded):
    # The command tables' short help (queuectl.cli.COMMANDS; test_cli holds it equal to each command's own).
    script = ("import atexit, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr));"
              "from queuectl.cli import main; main()")
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    commands = {m for m in r.stderr.split() if m.startswith("queuectl.cli.")} - {"queuectl.cli.common"}
    assert commands == loaded and "queuectl.worker" not in r.stderr.split()
    listed = r.stdout.split("Commands:\n", 1)[1]
    group = cli.get_command(None, args[0]) if len(args) > 1 else cli
    assert [line.split()[0] for line in listed.splitlines()] == group.list_commands(None)

