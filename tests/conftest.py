"""pytest's configuration for every tier: the fixtures they share (a queue on one engine or both, a store,
the in-process CLI, worker processes, the session's PostgreSQL server, the .deb) and the hooks that apply
the suite's rules (tests/support/suite.py: a test's tier is its folder). Helpers live in tests/support/."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from urllib.parse import unquote

import pytest

from queuectl.host.wake import wake_local_workers
from queuectl.store import open_store
from support.cli import Cli
from support.engines import ENGINES, engine_db, engine_of
from support.figures import report_figures
from support.pgserver import PgServer
from support.suite import (MARKED_TIERS, SERVICE_MANAGER_ENV, TESTS, TIER_TIMEOUTS, built_deb, misplaced,
                           require_postgres, tier_of)
from support.workers import WorkerProcs

# Tests never read the host's /etc/queuectl/queuectl.conf (their own processes inherit this too).
os.environ["QUEUECTL_CONFIG"] = ""

# What a service manager hands its processes, cleared for the suite and every program it starts
# (support.suite.SERVICE_MANAGER_ENV says why).
for _name in SERVICE_MANAGER_ENV:
    os.environ.pop(_name, None)

# A suite started in the background by a non-interactive shell (`make test &`, nohup) inherits SIGINT
# ignored, and so would every program it starts: Python then installs no handler, and the tests that
# press Ctrl+C (SIGINT) on a command would wait for ever. A handler here gives the children the default
# action again (exec resets a caught signal, not an ignored one); pytest's own is Python's default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
    config.addinivalue_line("markers",
                            "on_postgresql: the test's `db` is a PostgreSQL queue (tests/support/engines.py)")


@pytest.fixture
def db(request, tmp_path) -> str:
    """A fresh queue: a SQLite file's path (created on first use), or on each engine in turn, a SQLite path
    then a PostgreSQL URI, for a module or test marked `both_engines` (pytestmark = BOTH_ENGINES), or a
    PostgreSQL URI alone for one marked `on_postgresql` (pytestmark = ON_POSTGRESQL)."""
    return engine_db(request, tmp_path, engine_of(request))


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


@pytest.fixture
def store(db):
    s = open_store(db, after_commit=wake_local_workers)
    yield s
    s.close()


@pytest.fixture
def run_cli(db) -> Cli:
    return Cli(db)


@pytest.fixture
def figures(request):
    """Figures a test reports (tests/support/figures.py), under its tier's name."""
    yield from report_figures(request, tier_of(request.path) or "tests")


@pytest.fixture
def workers(db, tmp_path):
    w = WorkerProcs(db, tmp_path)
    yield w
    w.cleanup()


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


@pytest.fixture(scope="session")
def deb() -> Path:
    """The .deb of this tree (built_deb) that the system and guests tiers install."""
    return built_deb()
