"""Fixtures of the fast tier alone (the fixtures every tier shares are in tests/conftest.py)."""

from __future__ import annotations

import logging
import time

import pytest

from queuectl.domain.models import JobState
from queuectl.host.runner import Runner
from support import worker_steps as steps
from support.inprocess import Clock, stop_runner
from support.webapp import Dashboard
from support.webserver import SECRET


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
def clock() -> Clock:
    """A monotonic clock the test moves, at Clock.START."""
    return Clock()


@pytest.fixture
def runner(clock):
    """A real job runner (queuectl.host.runner) on `clock`; the jobs it still runs at the end killed."""
    runner = Runner(1024, clock=clock)
    yield runner
    stop_runner(runner)


@pytest.fixture
def dash(db, tmp_path):
    """The dashboard on `db` in-process (support.webapp.Dashboard: Flask's test client, the users of USERS)."""
    d = Dashboard(db, tmp_path)
    yield d
    d.close()


@pytest.fixture
def dead(store) -> str:
    """A dead job's id, "d1": its one attempt failed (exit 3), through a worker's steps; its command holds SECRET
    (support.webserver), which no refused answer may show."""
    now = time.time()
    steps.add(store, now, id="d1", command=f"deploy --token {SECRET}; exit 3", max_retries=0)
    worker = steps.register(store, now=now)
    [job] = steps.claim(store, worker, [], 1, now)
    assert steps.finish(store, worker, [steps.bad(job.id, 3)], now) == [JobState.DEAD]
    return job.id
