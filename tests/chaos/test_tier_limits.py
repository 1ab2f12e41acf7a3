"""The chaos tier's longer time limit, given by the folder (tests/support/suite.py, TIER_TIMEOUTS)."""

from __future__ import annotations

from support.suite import TIER_TIMEOUTS


def test_a_slow_tier_gets_its_longer_time_limit(request):
    # The test is instant: its folder alone gives it the chaos marker and the tier's limit replaces the default.
    assert request.node.get_closest_marker("chaos") is not None
    assert request.node.get_closest_marker("timeout").args == (TIER_TIMEOUTS["chaos"],)
