"""The .deb in a real systemd: install, shared use by group members, upgrade while a job runs, remove, purge.

The tests run in order on one container, as an admin would: install, use, upgrade, remove, purge.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from support.suite import require

from .container import REPO, SRV, TIER, apt, container_until, place_deb, q


@pytest.fixture(scope="module")
def host(booted, deb):
    """The booted container with the package's file under /srv, and an admin in group queuectl later."""
    return place_deb(booted, deb)


def test_version_agrees_with_pyproject_and_the_package(deb):
    pyproject = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    changelog = re.match(r"queuectl \(([^)]+)\)", (REPO / "debian" / "changelog").read_text()).group(1)
    package = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True).stdout.strip()
    import queuectl

    assert pyproject == changelog == package == queuectl.__version__


def test_units_ship_under_usr_lib_for_both_releases(deb):
    # Debian 13 aliases /lib to /usr/lib (lintian: aliased-location); Debian 12 reads both.
    paths = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True,
                           check=True).stdout.split()
    units = [p for p in paths if "/systemd/system/" in p and not p.endswith("/")]
    assert "./usr/lib/systemd/system/queuectl-worker@.service" in units
    assert all(p.startswith("./usr/lib/systemd/system/") for p in units), units
    assert not [p for p in paths if p.startswith("./lib/")]


def test_lintian_finds_no_error_or_warning(deb):
    require(None if shutil.which("lintian") else "lintian is missing (apt-get install lintian)", TIER)
    r = subprocess.run(["lintian", "--fail-on", "error,warning", "--pedantic", str(deb)],
                       capture_output=True, text=True, timeout=600)
    tags = [line for line in r.stdout.splitlines() if re.match(r"^[EWIPX]: ", line)]
    assert r.returncode == 0 and not [t for t in tags if t[0] in "EW"], r.stdout + r.stderr
    print("\n".join(tags) or "lintian: no tags")


def test_install_creates_user_directory_config_and_unit(host):
    c = host
    apt(c, "install", SRV)
    assert c.run("dpkg-query", "-W", "-f", "${Status} ${Version}", "queuectl").stdout.startswith(
        "install ok installed")
    assert c.run("id", "-u", "queuectl").returncode == 0
    assert c.run("getent", "group", "queuectl").returncode == 0
    assert c.run("stat", "-c", "%a %U %G", "/var/lib/queuectl").stdout.split() == ["2770", "queuectl", "queuectl"]
    conffiles = c.run("dpkg-query", "-W", "-f", "${Conffiles}", "queuectl").stdout
    assert "/etc/queuectl/queuectl.conf" in conffiles
    assert "/var/lib/queuectl/queuectl.db" in (c.root / "etc/queuectl/queuectl.conf").read_text()
    assert c.run("systemctl", "cat", "queuectl-worker@.service").returncode == 0
    # the template's instances are not enabled by the package
    assert c.run("systemctl", "list-units", "--plain", "--no-legend", "queuectl-worker@*").stdout.strip() == ""
    # the metrics units are installed and, like the workers, not enabled
    for unit in ("queuectl-metrics.service", "queuectl-metrics.timer"):
        assert c.run("systemctl", "cat", unit).returncode == 0
    assert c.run("systemctl", "is-enabled", "queuectl-metrics.timer", check=False).stdout.strip() == "disabled"
    for page in ("queuectl-metrics", "queuectl-schedule-add", "queuectl-limit"):  # one per command, from --help
        assert c.run("man", "-w", page).returncode == 0, page
    assert c.run("man", "-w", "queuectl").stdout.strip().endswith("queuectl.1.gz")
    assert (c.root / "usr/share/bash-completion/completions/queuectl").exists()


def test_group_member_enqueues_and_reads_status_without_sudo(host):
    c = host
    c.run("systemctl", "enable", "--now", "queuectl-worker@1", timeout=60)
    assert c.show("queuectl-worker@1", "ActiveState")["ActiveState"] == "active"
    c.run("useradd", "--create-home", "--groups", "queuectl", "alice")
    jobs = "\n".join(json.dumps({"id": f"a{i}", "command": f"echo {i}; id -un"}) for i in range(50))
    c.run("queuectl", "enqueue", "--file", "-", user="alice", input=jobs)
    container_until(lambda: json.loads(q(c, "status", "--json", user="alice").stdout)["jobs"]["completed"] == 50,
          "50 completed jobs")
    assert q(c, "logs", "a42", user="alice").stdout == "42\nqueuectl\n"  # the worker ran it as user queuectl
    for name in ("queuectl.db", "queuectl.db-wal", "queuectl.db-shm"):
        mode, group = c.run("stat", "-c", "%A %G", f"/var/lib/queuectl/{name}").stdout.split()
        assert mode[4:6] == "rw" and group == "queuectl", (name, mode, group)
    status = json.loads(q(c, "status", "--json", user="alice").stdout)
    assert [w["name"] for w in status["workers"]] == ["1"]
    assert status["units"][0]["unit"] == "queuectl-worker@1.service"


def test_schedules_run_on_the_packages_croniter_and_time_zones(host, deb):
    c = host
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True).stdout
    assert "python3-croniter" in depends and "tzdata" in depends, depends
    r = q(c, "schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", '{"command":"true"}',
          user="alice")
    assert re.fullmatch(r"nightly: 30 2 \* \* \* \(Europe/Berlin\); next run \S+T02:30:00\+0[12]:00\n", r.stdout), r.stdout
    q(c, "schedule", "add", "tick", "--every", "1s", '{"command":"echo tick"}', user="alice")
    container_until(lambda: any(s["last_state"] == "completed" for s in json.loads(q(c, "schedule", "list", "--json").stdout)),
          "a run of the schedule, fired by the packaged worker, to complete")
    q(c, "schedule", "rm", "tick", "nightly", user="alice")


def test_a_user_outside_the_group_gets_one_clear_line(host):
    c = host
    c.run("useradd", "--create-home", "bob")
    before = q(c, "status", "--json").stdout
    for args in (("status",), ("enqueue", '{"command":"true"}')):
        r = q(c, *args, user="bob", check=False)
        assert r.returncode == 2, r
        assert r.stdout == ""
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("queuectl: error: permission denied"), r.stderr
        assert "group queuectl" in r.stderr
    assert json.loads(q(c, "status", "--json").stdout)["jobs"] == json.loads(before)["jobs"]


def test_upgrade_restarts_running_instances_after_their_jobs_finish(host):
    c = host
    c.run("queuectl", "enqueue", '{"id":"during-upgrade","command":"sleep 10; echo survived"}', user="alice")
    container_until(lambda: json.loads(q(c, "show", "during-upgrade", "--json").stdout)["state"] == "processing",
          "the job to start")
    old_pid = c.show("queuectl-worker@1", "MainPID")["MainPID"]
    began = time.monotonic()
    c.run("dpkg", "-i", SRV, timeout=600)  # the same package again: an upgrade in dpkg's eyes
    assert time.monotonic() - began > 5  # the restart waited for the running job
    info = json.loads(q(c, "show", "during-upgrade", "--json").stdout)
    assert (info["state"], info["attempts"]) == ("completed", 1)
    assert q(c, "logs", "during-upgrade").stdout == "survived\n"
    props = c.show("queuectl-worker@1", "ActiveState", "MainPID")
    assert props["ActiveState"] == "active" and props["MainPID"] != old_pid


def test_remove_stops_instances_and_keeps_data_purge_removes_it(host):
    c = host
    removed = apt(c, "remove", "queuectl")
    assert c.show("queuectl-worker@1", "ActiveState")["ActiveState"] in ("inactive", "failed")
    assert c.run("pgrep", "-u", "queuectl", check=False).stdout == ""
    assert (c.root / "var/lib/queuectl/queuectl.db").exists()
    assert (c.root / "etc/queuectl/queuectl.conf").exists()
    wants = c.root / "etc/systemd/system/multi-user.target.wants/queuectl-worker@1.service"
    assert wants.is_symlink()  # the admin's `enable` survives a remove
    purged = apt(c, "purge", "queuectl")
    for r in (removed, purged):  # Debian 13 warned of /lib/systemd/system "not empty" with units under /lib
        assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    assert not (c.root / "var/lib/queuectl").exists()
    assert not (c.root / "etc/queuectl").exists()
    assert not wants.is_symlink()  # and no dangling link survives a purge
