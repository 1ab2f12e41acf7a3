"""Tier 3: a real systemd in a container, with queuectl installed into it.

Needs root and systemd-nspawn. Elsewhere the tier is skipped with the reason printed;
under CI (CI=true) it fails instead, so CI never passes without running it.
"""

from __future__ import annotations

import os

import pytest

from support.suite import require

from .container import (RELEASES, REPO, TIER, Container, debian_python_missing, install_source,
                        missing_prerequisites, release_root)


@pytest.fixture(scope="module", params=RELEASES)
def release(request) -> str:
    """The Debian release a module's container runs: each module's tests run on each of RELEASES."""
    return request.param


@pytest.fixture(scope="module")
def booted(release):
    """A freshly booted container of Debian `release` for one test module (its root: release_root)."""
    require(missing_prerequisites(release), TIER)
    try:
        lower = release_root(release)
    except RuntimeError as e:  # debootstrap failed: no route to Debian's archive, say
        require(str(e), TIER)
    container = Container(machine=f"qtest-{release[:4]}-{os.getpid()}", lower=lower)
    try:
        container.boot()
        yield container
    finally:
        container.teardown()


@pytest.fixture(scope="module")
def source_install(booted):
    """The container with queuectl installed from this source tree: launcher, units, system user."""
    require(debian_python_missing(root=booted.lower), TIER)
    c = booted
    install_source(c)
    for unit in (REPO / "systemd").iterdir():
        c.write(f"/etc/systemd/system/{unit.name}", unit.read_text())
    c.write("/etc/queuectl/queuectl.conf", (REPO / "packaging" / "queuectl.conf").read_text())
    c.run("useradd", "--system", "--home-dir", "/var/lib/queuectl", "--shell", "/usr/sbin/nologin", "queuectl")
    c.run("systemctl", "daemon-reload")
    return c


@pytest.fixture
def sysd(source_install):
    """The installed container, reset: no worker units running, no database, no drop-ins or env files."""
    c = source_install
    yield c
    c.run("systemctl", "stop", "queuectl-worker@*.service", check=False, timeout=120)
    c.run("systemctl", "reset-failed", "queuectl-worker@*.service", check=False)
    c.run("sh", "-c", "rm -rf /var/lib/queuectl/* /etc/queuectl/worker-*.env"
                      " /etc/systemd/system/queuectl-worker@.service.d")
    c.run("systemctl", "daemon-reload")
