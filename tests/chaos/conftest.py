"""The chaos tier (`pytest -m chaos`): kill storms, contention, a full disk and clock steps, at full size.

Each test prints its figures (a line per measure) whether it passes or fails. Tests that
need root or a Debian package skip with the reason printed, and fail under CI (CI=true).
"""

from __future__ import annotations

import os
import sqlite3

import pytest


class Figures:
    """Measures a test reports: `figures.add("reruns", 3)`; printed as one block after the test."""

    def __init__(self, name: str):
        self.name = name
        self.rows: list[tuple[str, object]] = []

    def add(self, what: str, value) -> None:
        self.rows.append((what, value))

    def lines(self) -> list[str]:
        width = max((len(w) for w, _ in self.rows), default=0)
        return [f"[chaos] {self.name}"] + [f"    {w.ljust(width)}  {v}" for w, v in self.rows]


@pytest.fixture
def figures(request):
    f = Figures(request.node.name)
    yield f
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and f.rows:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in f.lines():
                reporter.write_line(line)


def integrity(db: str) -> str:
    """`PRAGMA integrity_check` of the database file ("ok" when sound)."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` so far, in seconds (proc(5): stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
