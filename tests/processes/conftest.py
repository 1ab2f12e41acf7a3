"""Fixtures of the processes tier alone (the fixtures every tier shares are in tests/conftest.py)."""

from __future__ import annotations

import os
import signal

import pytest

from support.figures import report_figures


@pytest.fixture
def figures(request):
    """Figures a processes test reports (tests/support/figures.py); the chaos and multihost tiers'
    conftests name their own tier."""
    yield from report_figures(request, "processes")


def _queuectl_children() -> list[int]:
    """Pids of this process's live children that run queuectl (`python -m queuectl ...`)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if int(fields[1]) == os.getpid() and fields[0] not in (b"Z", b"X") and b"queuectl" in argv:
            found.append(int(name))
    return found


@pytest.fixture(autouse=True)
def no_command_left_running():
    """Kill the queuectl commands a test started and left running (a test that failed while one waited:
    otherwise it would wait on, for ever, after the suite). Workers are WorkerProcs' to stop."""
    yield
    for pid in _queuectl_children():
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
