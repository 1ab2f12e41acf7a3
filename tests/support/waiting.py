"""Waiting on a condition, never on a fixed sleep."""

from __future__ import annotations

import time


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, message: str = "condition"):
    """Poll `predicate` until it returns a truthy value; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)
