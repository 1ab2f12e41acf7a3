"""Fixtures of the processes tier alone (the fixtures every tier shares are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from support.figures import report_figures


@pytest.fixture
def figures(request):
    """Figures a processes test reports (tests/support/figures.py); the chaos and multihost tiers'
    conftests name their own tier."""
    yield from report_figures(request, "processes")
