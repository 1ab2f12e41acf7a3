"""The suite's own rules: what its children inherit, how a missing driver skips, that every test has a
time limit. They hold on Debian 12 (pytest 7.2) and Debian 13 (pytest 8.3), and on PyPI's newest pytest."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import SERVICE_MANAGER_ENV, TIER_TIMEOUTS, import_or_skip


def test_the_programs_the_suite_starts_inherit_nothing_from_a_service_manager():
    # The shell that ran pytest may have them (systemd-nspawn sets NOTIFY_SOCKET): conftest cleared them.
    child = subprocess.run([sys.executable, "-c", "import os, sys; print(sorted(set(os.environ) & set(sys.argv[1:])))",
                            *SERVICE_MANAGER_ENV], capture_output=True, text=True, check=True, timeout=60)
    assert child.stdout == "[]\n"
    assert not set(SERVICE_MANAGER_ENV) & set(os.environ)


def test_the_suite_clears_them_when_the_shell_that_runs_it_has_them():
    # The test above in a pytest of its own, started from a shell that has every one of them set (here
    # they are cleared already, so on its own that test could not fail).
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_the_programs_the_suite_starts_inherit_nothing_from_a_service_manager"],
        env={**os.environ, **dict.fromkeys(SERVICE_MANAGER_ENV, "/run/qtest-inherited")},
        cwd=os.path.dirname(os.path.dirname(__file__)), capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and "1 passed" in child.stdout, child.stdout + child.stderr


def test_a_driver_that_is_installed_but_cannot_load_skips_naming_why(tmp_path, monkeypatch):
    # psycopg without libpq raises a plain ImportError, which pytest 9's importorskip lets through.
    (tmp_path / "qtest_broken_driver.py").write_text("raise ImportError('no pq wrapper available: libpq not found')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="qtest_broken_driver cannot be imported: no pq wrapper"):
        import_or_skip("qtest_broken_driver")
    with pytest.raises(pytest.skip.Exception, match="qtest_absent_driver cannot be imported: No module named"):
        import_or_skip("qtest_absent_driver")
    assert import_or_skip("json").loads("1") == 1


def test_every_test_has_a_time_limit(request):
    # pyproject.toml's default (pytest-timeout): a hang fails one case with a traceback, not the run.
    assert request.config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not installed"
    assert float(request.config.getini("timeout")) > 0


@pytest.mark.chaos  # the marker alone (the test is instant): its tier's limit replaces the default
def test_a_slow_tier_gets_its_longer_time_limit(request):
    assert request.node.get_closest_marker("timeout").args == (TIER_TIMEOUTS["chaos"],)
