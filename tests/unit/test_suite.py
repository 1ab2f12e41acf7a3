"""The suite's own rules: what its children inherit, how a missing driver skips, that every test has a
time limit, that a test's tier is its folder (tests/unit, tests/processes, ...) and nothing else. They
hold on Debian 12 (pytest 7.2) and Debian 13 (pytest 8.3), and on PyPI's newest pytest."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from support.suite import MARKED_TIERS, SERVICE_MANAGER_ENV, TESTS, TIERS, import_or_skip, misplaced, tier_of


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
        cwd=TESTS.parent, capture_output=True, text=True, timeout=120)
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


def test_a_tests_tier_is_the_folder_it_sits_in():
    assert tier_of(__file__) == "unit"
    assert [tier_of(TESTS / tier / "test_x.py") for tier in TIERS] == list(TIERS)
    assert tier_of(TESTS / "processes" / "deeper" / "test_x.py") == "processes"
    for nowhere in (TESTS / "test_x.py", TESTS / "support" / "test_x.py", TESTS.parent / "bench" / "test_x.py"):
        assert tier_of(nowhere) is None, nowhere


def test_a_test_with_a_tier_marker_or_out_of_the_tier_folders_is_refused():
    assert misplaced(TESTS / "unit" / "test_x.py", ["parametrize", "timeout"]) is None
    assert misplaced(TESTS / "processes" / "test_x.py", []) is None
    for tier in MARKED_TIERS:  # another tier's marker, in every folder
        for folder in TIERS:
            problem = misplaced(TESTS / folder / "test_x.py", [tier])
            assert problem and f"carries the tier marker {tier} in tests/{folder}/" in problem, problem
    assert "drop the marker" in misplaced(TESTS / "chaos" / "test_x.py", ["chaos"])  # redundant
    assert "sits in no tier's folder" in misplaced(TESTS / "test_x.py", [])


def test_the_tier_folders_are_all_there_and_no_test_sits_outside_them():
    # The hook refuses such a test when it is collected; this finds one in a file pytest was not given.
    assert {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))} >= {*TIERS, "support"}
    stray = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if tier_of(p) is None)
    assert stray == [], stray
    marked = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py") if p.name != "conftest.py"
                    and re.search(rf"pytest\.mark\.({'|'.join(MARKED_TIERS)})\b", p.read_text()))
    assert marked == [], marked


def test_a_module_marked_both_engines_runs_each_test_on_each_engine_unless_one_names_its_engine():
    # tests/support/engines.py's marks, read off a real collection: test_keys is marked BOTH_ENGINES;
    # test_cli's file test is SQLITE_ONLY; test_api is marked with neither (a SQLite `db` alone).
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/unit/test_keys.py::test_a_held_key_prints_the_holder_and_exits_0",
         "tests/unit/test_cli.py::test_empty_file_becomes_a_queuectl_database",
         "tests/unit/test_api.py::test_cancel_takes_ids_or_a_choice_not_both_nor_neither"],
        cwd=TESTS.parent, capture_output=True, text=True, timeout=120).stdout.splitlines()
    ids = [line.split("::", 1)[1] for line in listed if "::" in line]
    assert [i for i in ids if i.startswith("test_a_held_key")] == [
        "test_a_held_key_prints_the_holder_and_exits_0[sqlite]",
        "test_a_held_key_prints_the_holder_and_exits_0[postgresql]"]
    assert [i for i in ids if i.startswith("test_empty_file")] == ["test_empty_file_becomes_a_queuectl_database[sqlite]"]
    assert [i for i in ids if i.startswith("test_cancel")] == ["test_cancel_takes_ids_or_a_choice_not_both_nor_neither"]


def test_conftest_files_are_configuration_and_no_module_imports_from_one():
    # Helpers live in tests/support/ (or a tier's own module); a conftest holds fixtures and hooks.
    importers = sorted(f"{p.relative_to(TESTS)}: {m.group(0)}" for p in TESTS.rglob("*.py")
                       for m in re.finditer(r"^\s*(?:from \.?conftest import|import conftest)\b.*$", p.read_text(), re.M))
    assert importers == [], importers
