"""Fixtures of the fast tier alone (the fixtures every tier shares are in tests/conftest.py)."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture
def worker_log():
    """The lines the worker logs (queuectl.worker), whatever the logging set-up earlier tests left (a worker run
    in-process configures the log, and pytest's caplog then sees nothing)."""
    lines: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("queuectl.worker")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(level)
