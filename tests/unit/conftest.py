"""Fixtures of the fast tier alone (the fixtures every tier shares are in tests/conftest.py)."""

from __future__ import annotations

import logging
import signal

import pytest

from queuectl.host.runner import Runner


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


@pytest.fixture
def runner(request):
    """A real runner (1024 bytes of output kept per job) whose monotonic clock reads the test module's MONO until
    a test moves it (`runner.clock.t`); what it still runs at the end is killed (SIGKILL) and reaped."""
    clock = lambda: clock.t  # noqa: E731
    clock.t = request.module.MONO
    runner = Runner(1024, clock=clock)
    yield runner
    runner.stop_all(signal.SIGKILL)
    while runner.running:
        runner.wait(None)
    runner.close()
