"""The shipped systemd units: systemd/queuectl-worker@.service and systemd/queuectl.target (and, at the
end, the dashboard's queuectl-web.socket and queuectl-web.service).

`systemd-analyze verify` and `systemd-analyze security --offline=true` check an instance
of the template (queuectl-worker@1.service) copied to tmp_path; only its ExecStart's
/usr/bin/queuectl is pointed at an executable that exists here, since the package is not
installed system-wide. The static checks read the unit as shipped and hold it to the
design (and to the code it starts: exit codes, environment variable names).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from queuectl.api import conffile
from queuectl.cli import EXIT_CODES
from queuectl.cli.worker_start import start as worker_start
from queuectl.domain.errors import InvalidConfig
from queuectl.worker import EXIT_CONFIG

SYSTEMD_DIR = Path(__file__).resolve().parents[2] / "systemd"
TEMPLATE = SYSTEMD_DIR / "queuectl-worker@.service"
TARGET = SYSTEMD_DIR / "queuectl.target"
SITE_CONFIG = SYSTEMD_DIR.parent / "packaging" / "queuectl.conf"
INSTANCE = "queuectl-worker@1.service"
SHIPPED_BINARY = "/usr/bin/queuectl"

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


# -- helpers ---------------------------------------------------------------------------------------------


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """Parse unit-file text line-wise: {section: [(key, value), ...]} in file order (keys may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):  # continuation
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"assignment outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not an assignment: {line!r}"
        current.append((key.strip(), value.strip()))
    return sections


class Unit:
    def __init__(self, path: Path):
        self.path = path
        self.text = path.read_text()
        self.sections = parse_unit(self.text)

    def all(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def get(self, section: str, key: str) -> str | None:
        values = self.all(section, key)
        return values[-1] if values else None  # systemd: the last assignment wins for single-valued keys


_SPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400}


def seconds(span: str) -> float:
    """A systemd time span ("30s", "15min", "1min 30s", "90") in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", span.strip())
    assert parts and re.fullmatch(r"(\s*\d+(\.\d+)?\s*[a-z]*)+\s*", span), span
    return sum(float(n) * _SPAN_UNITS[u or "s"] for n, u in parts)


def environment(unit: Unit) -> dict[str, str]:
    """The Environment= assignments of [Service] (space-separated VAR=VALUE words, no quoting used here)."""
    env = {}
    for value in unit.all("Service", "Environment"):
        for word in value.split():
            name, _, val = word.partition("=")
            env[name] = val
    return env


def local_queuectl(tmp_path: Path) -> str:
    """An executable queuectl that exists here: the venv's console script, or a small wrapper."""
    candidate = Path(sys.executable).parent / "queuectl"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    wrapper = tmp_path / "bin" / "queuectl"
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m queuectl "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def make_instance(tmp_path: Path, text: str | None = None) -> Path:
    """Copy the template as queuectl-worker@1.service (and the target beside it) into tmp_path/units.

    Only ExecStart's /usr/bin/queuectl is rewritten, to an executable that exists here.
    """
    text = TEMPLATE.read_text() if text is None else text
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("ExecStart=")]
    assert len(starts) == 1, "expected exactly one ExecStart= line"
    i = starts[0]
    assert lines[i].startswith(f"ExecStart={SHIPPED_BINARY} "), lines[i]
    lines[i] = lines[i].replace(SHIPPED_BINARY, local_queuectl(tmp_path), 1)
    d = tmp_path / "units"
    d.mkdir(exist_ok=True)
    shutil.copy(TARGET, d / TARGET.name)
    path = d / INSTANCE
    path.write_text("".join(lines))
    return path


def analyze(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ANALYZE, "--no-pager", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def verify(path: Path) -> subprocess.CompletedProcess:
    # --man=no: Documentation=man:queuectl(1) comes with the .deb, not in this checkout.
    r = analyze("verify", "--man=no", str(path), str(path.parent / TARGET.name))
    print(f"systemd-analyze verify {path.name}: exit {r.returncode}\nstderr:\n{r.stderr}")
    return r


# -- systemd-analyze verify -------------------------------------------------------------------------------


@needs_analyze
def test_verify_instance_is_clean(tmp_path):
    r = verify(make_instance(tmp_path))
    # verify exits 0 even on parse errors ("... ignoring"): any line on stderr is a finding.
    assert r.stderr.splitlines() == [], r.stderr
    assert r.returncode == 0


@needs_analyze
@pytest.mark.parametrize("good, bad", [
    ("Type=notify", "Type=bogus"),
    ("NotifyAccess=main", "NotifyAccess=somebody"),
    ("KillMode=mixed", "KillMode=mixed\nFrobnicate=yes"),
    ("WatchdogSec=30s", "WatchdogSec=thirty"),
])
def test_verify_reports_a_bad_line(tmp_path, good, bad):
    text = TEMPLATE.read_text()
    assert re.search(rf"^{re.escape(good)}$", text, re.M), good
    r = verify(make_instance(tmp_path, re.sub(rf"^{re.escape(good)}$", bad, text, count=1, flags=re.M)))
    assert r.stderr.strip(), "systemd-analyze verify found nothing wrong with a broken unit"
    assert INSTANCE in r.stderr


@needs_analyze
def test_verify_needs_the_executable_to_exist(tmp_path):
    # The unshipped binary path is why the instance's ExecStart is rewritten.
    path = make_instance(tmp_path)
    path.write_text(path.read_text().replace(local_queuectl(tmp_path), "/nonexistent/queuectl"))
    r = verify(path)
    assert r.returncode != 0 and "/nonexistent/queuectl" in r.stderr


# -- systemd-analyze security -----------------------------------------------------------------------------


@needs_analyze
def test_security_exposure_is_at_most_4(tmp_path):
    path = make_instance(tmp_path)
    r = analyze("security", "--offline=true", str(path))
    m = re.search(r"Overall exposure level for (\S+): (\d+\.\d+)", r.stdout + r.stderr)
    assert m, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    print(f"systemd-analyze security: overall exposure level for {m.group(1)}: {m.group(2)}")
    assert m.group(1) == INSTANCE
    assert float(m.group(2)) <= 4.0, r.stdout


# -- static checks ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unit() -> Unit:
    return Unit(TEMPLATE)


def test_unit_parses_as_ini(unit):
    # Also readable by configparser (lenient: systemd allows repeated keys).
    import configparser

    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read_string(TEMPLATE.read_text())
    assert set(cp.sections()) == {"Unit", "Service", "Install"} == set(unit.sections)
    assert cp["Service"]["Type"] == "notify"


@pytest.mark.parametrize("key, expected", [
    ("Type", "notify"),
    ("NotifyAccess", "main"),
    ("Restart", "on-failure"),
    ("KillMode", "mixed"),
    ("KillSignal", "SIGTERM"),
    ("User", "queuectl"),
    ("Group", "queuectl"),
    ("StateDirectory", "queuectl"),
    ("UMask", "0007"),
    ("EnvironmentFile", "-/etc/queuectl/worker-%i.env"),
    ("NoNewPrivileges", "yes"),
    ("PrivateTmp", "yes"),
    ("ProtectSystem", "strict"),
    ("ProtectHome", "yes"),
])
def test_service_setting(unit, key, expected):
    assert unit.all("Service", key) == [expected]


def test_watchdog_and_timeouts(unit):
    watchdog = seconds(unit.get("Service", "WatchdogSec"))
    # The worker pings every WatchdogSec / 2, after a heartbeat write that may wait on a busy
    # database; the timeout must leave room for that (and not be off, 0).
    assert 10 <= watchdog <= 300, watchdog
    assert seconds(unit.get("Service", "TimeoutAbortSec")) > 0
    # Stopping drains running jobs: the stop timeout is long, well beyond the watchdog.
    assert seconds(unit.get("Service", "TimeoutStopSec")) >= 60
    assert seconds(unit.get("Service", "RestartSec")) > 0


def test_restart_prevented_on_configuration_errors(unit):
    statuses = " ".join(unit.all("Service", "RestartPreventExitStatus")).split()
    assert "78" in statuses
    # The same number the code uses for a configuration error.
    assert EXIT_CONFIG == 78 and dict(EXIT_CODES)[InvalidConfig] == 78


def test_execstart_runs_the_worker_in_the_foreground_named_after_the_instance(unit):
    [exec_start] = unit.all("Service", "ExecStart")
    argv = exec_start.split()
    assert argv[:3] == [SHIPPED_BINARY, "worker", "start"], argv
    # The name comes from the environment, so that worker-%i.env or a drop-in can change it
    # (hosts sharing a PostgreSQL queue need names of their own): --name would win over it.
    assert "--name" not in argv
    assert environment(unit)["QUEUECTL_WORKER_NAME"] == "%i"
    assert "--daemon" not in argv  # Type=notify: the main process is the worker itself


def test_environment(unit):
    env = environment(unit)
    assert env["QUEUECTL_UNIT"] == "%n"
    # The database the service uses, from the unit or else from the shipped site configuration,
    # lives in the StateDirectory: the one place ProtectSystem=strict leaves writable.
    db = env.get("QUEUECTL_DB")
    if db is None:
        site = conffile.load({"QUEUECTL_CONFIG": str(SITE_CONFIG)})
        assert site.path is not None, f"the unit names no database and {SITE_CONFIG} is missing"
        db = site.db
    assert db and db.startswith(f"/var/lib/{unit.get('Service', 'StateDirectory')}/"), db


def test_documented_environment_variables_exist(unit):
    # The comments tell admins what to put in worker-%i.env: those names must be the real ones.
    documented = set(re.findall(r"QUEUECTL_WORKER_[A-Z_]+", unit.text))
    known = {p.envvar for p in worker_start.params if p.envvar}
    assert documented and documented <= known, (documented, known)


def test_target_groups_the_instances(unit):
    # `systemctl stop/restart queuectl.target` reaches every instance through PartOf=.
    assert "queuectl.target" in unit.get("Unit", "PartOf").split()
    # An enabled instance starts at boot.
    wanted_by = " ".join(unit.all("Install", "WantedBy")).split()
    assert "multi-user.target" in wanted_by or "queuectl.target" in wanted_by, wanted_by
    target = Unit(TARGET)
    assert target.get("Unit", "Description")
    if "queuectl.target" in wanted_by:  # instances hang off the target: it must itself start at boot
        assert "multi-user.target" in (target.get("Install", "WantedBy") or "").split()


# -- the dashboard's units: queuectl-web.socket and queuectl-web.service ------------------------------------

WEB_SOCKET, WEB_SERVICE = SYSTEMD_DIR / "queuectl-web.socket", SYSTEMD_DIR / "queuectl-web.service"


def web_units(tmp_path: Path) -> Path:
    """Copy the dashboard's units into tmp_path/units, the service's ExecStart pointed at an executable here;
    return the service's path."""
    d = tmp_path / "units"
    d.mkdir(exist_ok=True)
    shutil.copy(WEB_SOCKET, d / WEB_SOCKET.name)
    text = WEB_SERVICE.read_text()
    assert f"\nExecStart={SHIPPED_BINARY} web\n" in text
    path = d / WEB_SERVICE.name
    path.write_text(text.replace(f"ExecStart={SHIPPED_BINARY} ", f"ExecStart={local_queuectl(tmp_path)} "))
    return path


@needs_analyze
def test_web_units_verify_clean(tmp_path):
    service = web_units(tmp_path)
    r = analyze("verify", "--man=no", str(service.parent / WEB_SOCKET.name), str(service))
    assert r.stderr.splitlines() == [] and r.returncode == 0, r.stderr


@needs_analyze
def test_web_service_exposure_is_at_most_4(tmp_path):
    r = analyze("security", "--offline=true", str(web_units(tmp_path)))
    m = re.search(r"Overall exposure level for queuectl-web\.service: (\d+\.\d+)", r.stdout + r.stderr)
    assert m, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    print(f"systemd-analyze security: queuectl-web.service: {m.group(1)}")
    assert float(m.group(1)) <= 4.0, r.stdout


def test_web_socket_listens_where_queuectl_web_does_by_default():
    from queuectl.web.config import DEFAULT_BIND

    socket = Unit(WEB_SOCKET)
    assert socket.all("Socket", "ListenStream") == [DEFAULT_BIND]
    assert socket.get("Socket", "Accept") in (None, "no")  # one service serves every connection
    assert socket.all("Install", "WantedBy") == ["sockets.target"]


def test_web_service_runs_the_dashboard_as_the_queue_user_and_keeps_a_bad_configuration_down():
    service = Unit(WEB_SERVICE)
    assert service.all("Service", "ExecStart") == [f"{SHIPPED_BINARY} web"]
    assert (service.get("Service", "Type"), service.get("Service", "NotifyAccess")) == ("notify", "main")
    assert (service.get("Service", "User"), service.get("Service", "Group")) == ("queuectl", "queuectl")
    assert "78" in " ".join(service.all("Service", "RestartPreventExitStatus")).split()
    # The database it may make stays usable by group queuectl, as the workers' (same umask, directory).
    template = Unit(TEMPLATE)
    for key in ("UMask", "StateDirectory", "StateDirectoryMode"):
        assert service.get("Service", key) == template.get("Service", key), key
    # Started by its socket only: nothing in [Install] would start it at boot on its own.
    assert service.all("Install", "WantedBy") == [] and service.all("Install", "Also") == [WEB_SOCKET.name]
