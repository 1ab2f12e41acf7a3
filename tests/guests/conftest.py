"""Tier 6: the package's DEP-8 tests (debian/tests) in booted Debian 12 and 13 guests with their own kernels,
run by autopkgtest's QEMU backend (tests/guests/images.py). Needs root, QEMU and autopkgtest; elsewhere the
tier is skipped with the reason printed, and under CI (CI=true) it fails instead.

Not yet part of a plain `make test`: it runs when asked, by QUEUECTL_TEST_GUESTS=1 or by naming it (`-m
guests`, `pytest tests/guests`), until its power-cut test lands and it has passed 20 runs in a row
(docs/testing.md). Asked for otherwise, its tests are deselected and the summary says so.
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def asked(config) -> bool:
    """Whether this run asked for the tier: QUEUECTL_TEST_GUESTS=1, `-m` naming it, or a path in it."""
    if os.environ.get("QUEUECTL_TEST_GUESTS") == "1" or "guests" in (config.option.markexpr or ""):
        return True
    return any(Path(arg.split("::")[0]).resolve().is_relative_to(HERE) for arg in config.args)


def pytest_collection_modifyitems(config, items):
    if asked(config):
        return
    left = [item for item in items if Path(str(item.path)).resolve().is_relative_to(HERE)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if item not in left]
        config._queuectl_guests_left = len(left)


def pytest_terminal_summary(terminalreporter, config):
    left = getattr(config, "_queuectl_guests_left", 0)
    if left:
        terminalreporter.write_line(f"guests tier: {left} DEP-8 tests not run (QUEUECTL_TEST_GUESTS=1 or -m guests"
                                    " runs them: docs/testing.md)")
