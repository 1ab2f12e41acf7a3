"""Tier 6: the package's DEP-8 tests (debian/tests) in booted Debian 12 and 13 guests with their own kernels,
run by autopkgtest's QEMU backend (tests/guests/images.py). Needs root, QEMU and autopkgtest; elsewhere the
tier is skipped with the reason printed, and under CI (CI=true) it fails instead.

Its runs start in the background as soon as the session is collected (tests/guests/runs.py) and go on beside
the other tiers; its items are moved to the end of the session, where they wait for the runs' verdicts.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def _ours(item) -> bool:
    return Path(str(item.path)).resolve().is_relative_to(HERE)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_ours)  # stable: every other item keeps its place, the tier's come last


def pytest_collection_finish(session):
    from .runs import Runs

    if session.config.option.collectonly:
        return

    chosen: dict[str, list[str]] = {}
    for item in session.items:
        params = getattr(item, "callspec", None)
        if _ours(item) and item.originalname == "test_dep8" and params is not None:
            chosen.setdefault(params.params["release"], []).append(params.params["name"])
    if chosen:
        runs = session.config._queuectl_dep8 = Runs(chosen, session.config._tmp_path_factory.mktemp("dep8"))
        runs.start()


def pytest_sessionfinish(session):
    runs = getattr(session.config, "_queuectl_dep8", None)
    if runs is not None:
        runs.stop()


def pytest_terminal_summary(terminalreporter, config):
    """The figures the DEP-8 tests print (the power cut's: jobs, lost, stuck, run again, against the bound)."""
    runs = getattr(config, "_queuectl_dep8", None)
    for release, run in sorted(getattr(runs, "results", {}).items()):
        for output in sorted((run.out / "result").glob("*-stdout")):
            for line in output.read_text(errors="replace").splitlines():
                if line.startswith(("power-cut sqlite:", "power-cut postgresql:")):
                    terminalreporter.write_line(f"guests, {release}: {line}")
