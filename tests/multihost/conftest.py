"""The multihost tier's fixtures: the two hosts (booted once a session), a queue both reach, and a folder
for a test's runs (tests/multihost/cluster.py has the hosts and what drives them)."""

from __future__ import annotations

import itertools
import os

import pytest

from support.pgserver import PgServer
from support.suite import require

from .cluster import TIER, Cluster, Host, Runs, multihost_missing


@pytest.fixture(scope="session")
def cluster():
    """Host A and host B, booted once for the session (again after a test kills one)."""
    require(multihost_missing(), TIER)
    c = Cluster()
    try:
        c.ensure()
        yield c
    finally:
        c.teardown()


@pytest.fixture
def hosts(cluster) -> tuple[Host, Host]:
    """(host A, host B), both up; afterwards every worker unit and spawned process in them is killed."""
    cluster.ensure()
    try:
        yield cluster.a, cluster.b
    finally:
        cluster.reset()


_dirs = itertools.count(1)


@pytest.fixture
def runs(cluster, request) -> Runs:
    return Runs(cluster.shared / f"t{next(_dirs)}-{request.node.name.replace('[', '-').strip(']')}")


@pytest.fixture
def db(request, cluster) -> str:
    """A fresh, empty queue that both hosts and this process reach: a database on the session's server."""
    if os.environ.get("QUEUECTL_MULTIHOST_DB") == "sqlite":
        d = cluster.shared / f"db{next(_dirs)}"
        d.mkdir()
        return str(d / "queue.db")
    require(PgServer.missing(), TIER)
    return request.getfixturevalue("pg_uri")
