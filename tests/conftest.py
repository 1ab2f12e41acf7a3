"""Fixtures shared by every tier: a database path, a Click runner that works on Click 8.1 and 8.2+,
worker processes, and a real PostgreSQL server that the session starts itself (pg_server, pg_uri,
backend_db). And the tiers: a test's tier is the folder it sits in (tests/unit, tests/processes,
tests/system, tests/chaos, tests/multihost), which marks it (pytest_collection_modifyitems)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from support.engines import ENGINES
from support.pgserver import PgServer  # tests/support/pgserver.py
from queuectl.host import procs
from queuectl.cli import cli
from queuectl.store import is_uri, open_store
from queuectl.host.wake import wake_local_workers


def sqlite_path(tmp_path) -> str:
    return str(tmp_path / "queue.db")


@pytest.fixture
def db(request, tmp_path) -> str:
    """A fresh queue: a SQLite file's path (created on first use), or on each engine in turn, a SQLite path
    then a PostgreSQL URI, for a module or test marked `both_engines` (pytestmark = BOTH_ENGINES)."""
    return engine_db(request, tmp_path, getattr(request, "param", "sqlite"))


def engine_db(request, tmp_path, engine: str) -> str:
    """A fresh database on `engine`: a SQLite file path, or a PostgreSQL URI (pg_uri)."""
    return sqlite_path(tmp_path) if engine == "sqlite" else request.getfixturevalue("pg_uri")



def _parametrizes(metafunc, name: str) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if name in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return True
    return False


def pytest_generate_tests(metafunc):
    """`db` on each engine for a test marked `both_engines`, unless the test names its engine itself."""
    if ("db" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_engines")
            and not _parametrizes(metafunc, "db")):
        metafunc.parametrize("db", ENGINES, indirect=True, ids=ENGINES)


def snapshot(path) -> tuple:
    """Everything in the database: schema, rows of every table, and (SQLite) the header pragmas."""
    if is_uri(path):
        import psycopg

        with psycopg.connect(path) as con:
            tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables"
                                                " WHERE table_schema = 'queuectl' ORDER BY 1")]
            return tuple((t, tuple(con.execute(f"SELECT * FROM queuectl.{t} ORDER BY 1"))) for t in tables)
    con = sqlite3.connect(path)
    try:
        pragmas = tuple(con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("user_version", "application_id"))
        return pragmas, tuple(con.iterdump())
    finally:
        con.close()


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


@pytest.fixture
def store(db):
    s = open_store(db, after_commit=wake_local_workers)
    yield s
    s.close()


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


@pytest.fixture
def run_cli(db) -> Cli:
    return Cli(db)


# Tests never read the host's /etc/queuectl/queuectl.conf (their own processes inherit this too).
os.environ["QUEUECTL_CONFIG"] = ""

#: What a service manager hands the processes it starts (sd_notify(3), sd_listen_fds(3), the journal's
#: stream): a shell in a systemd-nspawn container or a command run from a unit carries some of them.
#: The suite clears them at its start, for itself and every program it starts: a test that wants one
#: sets it in its child's environment (with NOTIFY_SOCKET inherited, `worker start` would report to the
#: shell's systemd, and before issue 25 a burst worker waited for ever for an unreachable server).
SERVICE_MANAGER_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                       "LISTEN_FDNAMES", "JOURNAL_STREAM")
for _name in SERVICE_MANAGER_ENV:
    os.environ.pop(_name, None)

# A suite started in the background by a non-interactive shell (`make test &`, nohup) inherits SIGINT
# ignored, and so would every program it starts: Python then installs no handler, and the tests that
# press Ctrl+C (SIGINT) on a command would wait for ever. A handler here gives the children the default
# action again (exec resets a caught signal, not an ignored one); pytest's own is Python's default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


#: The tiers a test's folder under tests/ gives it: tests/unit is the fast tier (no marker); each other
#: folder marks its tests with the marker of its name, so `-m processes` and `-m "not processes and
#: not system and not chaos and not multihost and not guests"` select by folder.
MARKED_TIERS = ("processes", "system", "chaos", "multihost", "guests")
TIERS = ("unit", *MARKED_TIERS)
TESTS = Path(__file__).resolve().parent

#: Seconds a test of these tiers may take (pytest-timeout; pyproject.toml's `timeout` covers the rest):
#: they build the .deb, boot containers, install packages or run at full size. A test's own
#: @pytest.mark.timeout wins.
TIER_TIMEOUTS = {"system": 1800, "multihost": 1800, "chaos": 1200, "guests": 3600}


def tier_of(path) -> str | None:
    """Return the tier of the test file at `path`: the name of its folder under tests/, or None when it
    sits directly in tests/, in tests/support or outside tests/ (no tier)."""
    try:
        parts = Path(path).resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def misplaced(path, marks: Sequence[str]) -> str | None:
    """Say why a test at `path` carrying markers `marks` is in the wrong place, or return None.

    A test's tier is its folder and nothing else: a test outside the tier folders, or one that carries a
    tier's marker itself (another tier's, or its folder's made redundant), is refused.
    """
    tier = tier_of(path)
    if tier is None:
        return f"sits in no tier's folder: move it under tests/{{{','.join(TIERS)}}}/"
    marked = sorted(set(marks) & set(MARKED_TIERS))
    if marked:
        return (f"carries the tier marker {', '.join(marked)} in tests/{tier}/: the folder gives the tier;"
                f" drop the marker{'' if marked == [tier] else ' or move the test'}")
    return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the markers given here
def pytest_collection_modifyitems(config, items):
    problems = []
    for item in items:
        path = getattr(item, "path", None) or Path(str(item.fspath))
        if not Path(path).resolve().is_relative_to(TESTS):
            continue  # a test file named outside tests/ (the suite's own checks run some)
        problem = misplaced(path, [m.name for m in item.iter_markers()])
        if problem:
            problems.append(f"{item.nodeid}: {problem}")
            continue
        tier = tier_of(path)
        if tier in MARKED_TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if tier in TIER_TIMEOUTS and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUTS[tier]))
    if problems:
        raise pytest.UsageError("tests out of their tier's folder:\n  " + "\n  ".join(problems))


def import_or_skip(module: str):
    """Import and return `module`, or skip the test saying why it cannot load.

    Any ImportError skips, not only ModuleNotFoundError (pytest.importorskip's rule since pytest 9):
    psycopg installed without the libpq it loads raises a plain ImportError. A driver is optional
    (the package build has none), so this skips even under CI=true; tests that need a server use
    require_postgres, which says what to install.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.skip(f"{module} cannot be imported: {e}".replace("\n", " "))


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


def require_postgres() -> None:
    """Skip unless a PostgreSQL server can be started here (fail instead under CI=true).

    QUEUECTL_TEST_POSTGRES=skip skips everywhere, CI included: the Debian package build has no server.
    """
    if os.environ.get("QUEUECTL_TEST_POSTGRES") == "skip":
        pytest.skip("QUEUECTL_TEST_POSTGRES=skip")
    require(PgServer.missing(), "postgresql")


@pytest.fixture(scope="session")
def pg_server():
    """One PostgreSQL server for the whole session (tests/support/pgserver.py), removed at its end."""
    require_postgres()
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_uri(pg_server) -> str:
    """URI of a fresh database on pg_server (superuser, TCP); dropped after the test, connections or not."""
    if not pg_server.running():  # an earlier test stopped or killed it
        pg_server.start()
    uri = pg_server.create_database()
    yield uri
    try:
        pg_server.drop_database(unquote(uri.rsplit("/", 1)[1]), force=True)
    except Exception:  # the server may be down after a crash test; cleanup removes it all anyway
        pass


@pytest.fixture(params=ENGINES, ids=ENGINES)
def backend_db(request, tmp_path) -> str:
    """A fresh database on each engine in turn: a SQLite file path, then a PostgreSQL URI (the conformance
    suite's; a module of tests marks itself BOTH_ENGINES instead, and takes `db`)."""
    return engine_db(request, tmp_path, request.param)


_built_deb: list = []  # the one build's result: its path, or the exception it raised (skip and fail among them)
_building = threading.Lock()


def built_deb() -> Path:
    """The .deb built by `make deb` from this tree (tier-1 tests run inside the build, on Debian's Click), or
    the one QUEUECTL_TEST_DEB names (built before: repeated runs skip the build). Built once a session and
    safe from any thread: the guests tier builds it in the background while the others run, and a second
    caller waits for the first's build. Skips (fails under CI) without root or Debian's build tools;
    raises AssertionError when the build fails."""
    with _building:
        if not _built_deb:
            try:
                _built_deb.append(_build_deb())
            except BaseException as e:  # pytest's skip and fail are BaseExceptions: every caller gets them
                _built_deb.append(e)
    if isinstance(_built_deb[0], BaseException):
        raise _built_deb[0]
    return _built_deb[0]


def _build_deb() -> Path:
    require(None if os.geteuid() == 0 else "needs root", "package")
    if os.environ.get("QUEUECTL_TEST_DEB"):
        return Path(os.environ["QUEUECTL_TEST_DEB"])
    repo = TESTS.parent
    proc = subprocess.run(["make", "-C", str(repo), "deb"], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        missing = [line for line in proc.stderr.splitlines() if "needs Debian's build tools" in line]
        require(missing[0] if missing else None, "package")
        raise AssertionError(f"make deb failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    [package] = sorted((repo / "build" / "deb").glob("queuectl_*_all.deb"))
    return package


@pytest.fixture(scope="session")
def deb() -> Path:
    """The .deb of this tree (built_deb) that the system and guests tiers install."""
    return built_deb()
