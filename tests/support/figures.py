"""Figures a test reports (counts, seconds): printed as one block after the test, passed or failed.

    def test_x(figures):        # tests/conftest.py's fixture, named after the test's tier
        figures.add("reruns", 3)

The block goes straight to the terminal (pytest's capture is bypassed), so it shows without
`-s`, in the CI log too.
"""

from __future__ import annotations


class Figures:
    """Measures a test reports: `figures.add("reruns", 3)`; printed as one block after the test."""

    def __init__(self, name: str, tier: str = "chaos"):
        self.name = name
        self.tier = tier
        self.rows: list[tuple[str, object]] = []

    def add(self, what: str, value) -> None:
        self.rows.append((what, value))

    def lines(self) -> list[str]:
        width = max((len(w) for w, _ in self.rows), default=0)
        return [f"[{self.tier}] {self.name}"] + [f"    {w.ljust(width)}  {v}" for w, v in self.rows]


def report_figures(request, tier: str):
    """The body of a `figures` fixture: yield a Figures, then print what the test added to it."""
    f = Figures(request.node.name, tier)
    yield f
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and f.rows:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in f.lines():
                reporter.write_line(line)
