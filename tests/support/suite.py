"""The suite's own rules: the tiers (a test's tier is the folder it sits in, and its time limit comes with
it), what a tier needs and how a missing prerequisite skips (or fails under CI=true), what the programs a
test starts inherit, and the one .deb built from this tree. tests/conftest.py applies them."""

from __future__ import annotations

import importlib
import os
import subprocess
import threading
from pathlib import Path
from typing import Sequence

import pytest

from support.pgserver import PgServer


#: What a service manager hands the processes it starts (sd_notify(3), sd_listen_fds(3), the journal's
#: stream): a shell in a systemd-nspawn container or a command run from a unit carries some of them.
#: The suite clears them at its start, for itself and every program it starts: a test that wants one
#: sets it in its child's environment (with NOTIFY_SOCKET inherited, `worker start` would report to the
#: shell's systemd, and before issue 25 a burst worker waited for ever for an unreachable server).
SERVICE_MANAGER_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                       "LISTEN_FDNAMES", "JOURNAL_STREAM")


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
TESTS = Path(__file__).resolve().parents[1]


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


def require_postgres() -> None:
    """Skip unless a PostgreSQL server can be started here (fail instead under CI=true).

    QUEUECTL_TEST_POSTGRES=skip skips everywhere, CI included: the Debian package build has no server.
    """
    if os.environ.get("QUEUECTL_TEST_POSTGRES") == "skip":
        pytest.skip("QUEUECTL_TEST_POSTGRES=skip")
    require(PgServer.missing(), "postgresql")


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
