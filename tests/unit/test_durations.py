"""Durations as settings and options write them (queuectl.domain.settings): format_duration gives what parse_duration
reads back, in the largest whole unit, never in exponent notation."""

import pytest
from hypothesis import given, strategies as st

from queuectl.domain.settings import format_duration, parse_duration


@pytest.mark.parametrize("seconds, text", [
    (86400, "1d"), (90, "90s"), (2.5, "2.5s"), (3600, "1h"), (120, "2m"), (0, "0s"), (None, "forever"),
    (9999999 * 86400, "9999999d"), (1e-3, "0.001s")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@given(st.one_of(st.integers(min_value=0, max_value=10**12), st.floats(min_value=0, max_value=1e9)))
def test_a_formatted_duration_reads_back(seconds):
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)
