"""Tier 3: a real systemd in a container, with queuectl installed into it.

Needs root and systemd-nspawn. Elsewhere the tier is skipped with the reason printed;
under CI (CI=true) it fails instead, so CI never passes without running it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import require as require_for, wait_for  # tests/conftest.py

from .container import (RELEASES, REPO, Container, debian_python_missing, install_source, missing_prerequisites,
                        release_root)


def until(predicate, what: str, timeout: float = 60.0):
    """Poll `predicate` inside the container until it is truthy; fail after `timeout` seconds."""
    return wait_for(predicate, timeout=timeout, interval=0.2, message=what)


def require(reason: str | None) -> None:
    """Skip with `reason`, or fail under CI where this tier is mandatory."""
    require_for(reason, "system")


@pytest.fixture(scope="module", params=RELEASES)
def release(request) -> str:
    """The Debian release a module's container runs: each module's tests run on each of RELEASES."""
    return request.param


@pytest.fixture(scope="module")
def booted(release):
    """A freshly booted container of Debian `release` for one test module (its root: release_root)."""
    require(missing_prerequisites(release))
    try:
        lower = release_root(release)
    except RuntimeError as e:  # debootstrap failed: no route to Debian's archive, say
        require(str(e))
    container = Container(machine=f"qtest-{release[:4]}-{os.getpid()}", lower=lower)
    try:
        container.boot()
        yield container
    finally:
        container.teardown()


@pytest.fixture(scope="module")
def source_install(booted):
    """The container with queuectl installed from this source tree: launcher, units, system user."""
    require(debian_python_missing(root=booted.lower))
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


#: Where the package's file is put inside a container (not /tmp or /run: fresh tmpfs mounts inside).
SRV = "/srv/queuectl.deb"


def place_deb(c: Container, deb: Path) -> Container:
    """Put the .deb at SRV in container `c`, and let its maintainer scripts start and stop units."""
    # Build hosts and images often carry a policy-rc.d that forbids service actions (exit 101);
    # a server does not, and deb-systemd-invoke obeys it. The overlay hides it from the container only.
    c.run("rm", "-f", "/usr/sbin/policy-rc.d")
    (c.root / "srv").mkdir(exist_ok=True)
    (c.root / "srv" / "queuectl.deb").write_bytes(deb.read_bytes())
    return c


def apt(c: Container, *args: str) -> subprocess.CompletedProcess:
    """Run apt-get in `c` as an admin would, without questions or recommended packages."""
    return c.run("apt-get", "-y", "-q", "--no-install-recommends", *args,
                 env={"DEBIAN_FRONTEND": "noninteractive"}, timeout=600)
