"""A throwaway systemd container booted from an overlay of a root (tier 3 tests): this machine's,
or one of another Debian release that debootstrap makes and the tests cache (release_root).

Recipe: ../shared/systemd-container.md. Everything written inside lands on a tmpfs and
vanishes at teardown; the lower root's installed packages are visible inside.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Iterable, Sequence

from support.waiting import wait_for

CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REPO = Path(__file__).resolve().parents[2]
LAUNCHER = """#!/usr/bin/python3
# queuectl from the source tree under test, run by Debian's python3 with Debian's libraries.
import sys
sys.path.insert(0, "/opt/queuectl-src")
from queuectl.cli import main
main()
"""
#: Units of this host that a container must not start: they would listen on the network it shares.
MASKED = ("postgresql.service", "postgresql@.service")


#: The Debian releases the system tier boots, each with its Python: this host's own (an overlay of its
#: root) and the other, from a root that debootstrap makes (release_root).
RELEASES = ("bookworm", "trixie")
#: The tier, as support.suite.require names it (a missing prerequisite fails it under CI).
TIER = "system"
#: Where debootstrapped roots are kept between runs (QUEUECTL_TEST_CACHE overrides).
CACHE = Path(os.environ.get("QUEUECTL_TEST_CACHE", "/var/cache/queuectl-tests"))
MIRROR = "http://deb.debian.org/debian"
#: What a debootstrapped root has beyond minbase: a systemd that boots, what the tests run inside, and
#: every dependency of the .deb and of queuectl from source (so that installing them needs no network),
#: and the dashboard's recommended libraries (queuectl-web.service: test_web_service.py).
#: python3-cffi-backend is named because debootstrap resolves no virtual package: Debian 12's
#: python3-bcrypt depends on python3-cffi-backend-api-min/-max, which only it provides (without it a
#: Debian 12 root made on a Debian 13 host fails to configure python3-bcrypt).
ROOT_PACKAGES = ("systemd", "systemd-sysv", "dbus", "procps", "man-db", "passwd", "python3", "python3-click",
                 "python3-sdnotify", "python3-daemon", "python3-croniter", "python3-psycopg", "tzdata",
                 "python3-flask", "python3-gunicorn", "python3-bcrypt", "python3-cffi-backend")
#: Days a debootstrapped root serves before it is made again from the archive (which moves on).
ROOT_MAX_AGE_DAYS = 7


def host_release() -> str:
    """This machine's Debian release ("bookworm", "trixie", ...): VERSION_CODENAME of /etc/os-release."""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return ""


def missing_prerequisites(release: str | None = None) -> str | None:
    """Return why a container (of Debian `release`; None: this host's) cannot be booted here, or None if it can."""
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn and mounts)"
    for tool in ("systemd-nspawn", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install systemd-container util-linux)"
    if not Path("/lib/systemd/systemd").exists():
        return "systemd is not installed (apt-get install systemd)"
    if release not in (None, host_release()) and shutil.which("debootstrap") is None:
        return f"a Debian {release} root is made with debootstrap, which is missing (apt-get install debootstrap)"
    return None


def release_root(release: str) -> Path:
    """Return the root a container of Debian `release` boots from, as the lower layer of its overlay.

    This host's own root ("/") if it runs `release`; else a root that `debootstrap` makes from
    Debian's archive (about 40 s, and 330 MB), kept under CACHE in a directory named after its
    recipe (release, mirror, packages: a changed recipe makes a new root) and made again once it is
    ROOT_MAX_AGE_DAYS days old. Concurrent test runs wait on a lock while one makes it. Raises
    RuntimeError (with debootstrap's last lines) if debootstrap fails.
    """
    if release == host_release():
        return Path("/")
    recipe = "\n".join([release, MIRROR, "minbase", *ROOT_PACKAGES])
    root = CACHE / f"{release}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
    made = root / ".queuectl-made"  # written last: a root without it is incomplete
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if made.exists() and time.time() - made.stat().st_mtime < ROOT_MAX_AGE_DAYS * 86400:
            return root
        fresh = root.with_name(root.name + ".new")
        _remove_root(fresh)
        try:
            proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(ROOT_PACKAGES)}",
                                   release, str(fresh), MIRROR], capture_output=True, text=True, timeout=1200)
        finally:
            _unmount_under(fresh)  # debootstrap's /proc and /sys, if it was stopped before it unmounted them
        if proc.returncode != 0:
            _remove_root(fresh)
            raise RuntimeError(f"debootstrap {release} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        (fresh / made.name).write_text(recipe + "\n")
        _remove_root(root)
        fresh.rename(root)
        return root


def _unmount_under(path: Path) -> None:
    """Unmount (lazily) every mount at or below `path`, deepest first."""
    prefix = str(path.resolve())
    with open("/proc/self/mounts") as mounts:
        targets = [line.split()[1].encode().decode("unicode_escape") for line in mounts]
    for target in sorted({t for t in targets if t == prefix or t.startswith(prefix + "/")}, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)


def _remove_root(path: Path) -> None:
    """Remove a debootstrapped root, never crossing into a mount below it (a /proc, a bind of /dev)."""
    if path.exists():
        _unmount_under(path)
        shutil.rmtree(path, ignore_errors=True)


def debian_python_missing(modules: Sequence[str] = ("click", "sdnotify", "daemon", "croniter"),
                          root: Path = Path("/")) -> str | None:
    """Return what Debian's python3 (of the system under `root`) lacks to run queuectl from source
    (and import `modules`), or None."""
    chroot = [] if root == Path("/") else ["chroot", str(root)]
    probe = subprocess.run([*chroot, "/usr/bin/python3", "-B", "-c", f"import {', '.join(modules)}"],
                           capture_output=True)
    if probe.returncode != 0:
        packages = " ".join(f"python3-{m}" for m in modules)
        return f"Debian's python3 lacks {'/'.join(modules)} (apt-get install {packages})"
    return None


def install_source(c: "Container", launcher: str = "/usr/bin/queuectl") -> None:
    """Install queuectl from this source tree into `c`: the package under /opt/queuectl-src, a launcher."""
    c.copytree(REPO / "queuectl", "/opt/queuectl-src/queuectl")
    c.write(launcher, LAUNCHER, 0o755)


class Container:
    """One booted container. `run` executes a command inside with a clean environment.

    `machine` names it; systemd-nspawn makes that its hostname too (written to its
    /etc/hostname, which the container's systemd would otherwise take from this host),
    and it gets a machine id of its own. Two containers booted at once need two names.
    `nspawn_args` are added to systemd-nspawn's command line (`--bind=...`, say). The
    units in `mask` are masked before boot: the host's servers (PostgreSQL) would otherwise
    start inside too, on the network the container shares with the host. `lower` is the root
    under the overlay: this host's by default, or another release's (release_root).
    """

    def __init__(self, machine: str | None = None, nspawn_args: Sequence[str] = (),
                 mask: Sequence[str] = MASKED, lower: Path = Path("/")):
        self.machine = machine or f"qtest-{os.getpid()}"
        self.lower = Path(lower)
        self.nspawn_args = list(nspawn_args)
        self.mask = list(mask)
        self.base = Path(tempfile.mkdtemp(prefix="qtest.", dir="/run"))
        self.root = self.base / "root"
        self.nspawn: subprocess.Popen | None = None
        self.leader: int | None = None
        self._mounted: list[Path] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def boot(self, timeout: float = 90) -> None:
        rw = self.base / "rw"
        rw.mkdir()
        self.root.mkdir()
        self._mount(["-t", "tmpfs", "tmpfs", str(rw)], rw)
        (rw / "upper").mkdir()
        (rw / "work").mkdir()
        self._mount(["-t", "overlay", "overlay", "-o",
                     f"lowerdir={self.lower},upperdir={rw}/upper,workdir={rw}/work", str(self.root)], self.root)
        # The host's own /etc/hostname and machine id would show through the overlay: the
        # container's systemd would set the host's name, and journald would share its id.
        self.write("/etc/hostname", f"{self.machine}\n")
        self.write("/etc/machine-id", f"{uuid.uuid4().hex}\n", 0o444)
        for unit in self.mask:
            link = self.root / "etc/systemd/system" / unit
            link.unlink(missing_ok=True)
            link.symlink_to("/dev/null")
        console = open(self.base / "console.log", "wb")
        self.nspawn = subprocess.Popen(
            ["systemd-nspawn", "-D", str(self.root), "--boot", "--register=no", "--keep-unit",
             f"--machine={self.machine}", *self.nspawn_args],
            stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True,
        )
        console.close()
        deadline = time.monotonic() + timeout
        while self.leader is None:
            if self.nspawn.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited {self.nspawn.returncode}: {self.console()}")
            found = subprocess.run(["pgrep", "-P", str(self.nspawn.pid), "-x", "systemd"],
                                   capture_output=True, text=True).stdout.split()
            if found:
                self.leader = int(found[0])
            elif time.monotonic() > deadline:
                raise RuntimeError(f"no systemd in the container after {timeout} s: {self.console()}")
            else:
                time.sleep(0.2)
        state = ""
        while state not in ("running", "degraded"):
            try:
                state = self.run("systemctl", "is-system-running", "--wait", check=False,
                                 timeout=max(1.0, deadline - time.monotonic())).stdout.strip()
            except subprocess.TimeoutExpired:
                state = "timeout"
            if state not in ("running", "degraded") and time.monotonic() > deadline:
                jobs = self.run("systemctl", "list-jobs", "--no-pager", check=False, timeout=10).stdout
                raise RuntimeError(f"container did not finish booting ({state!r}); pending jobs:\n{jobs}"
                                   f"\nconsole:\n{self.console()}")

    def _mount(self, args: list[str], target: Path) -> None:
        subprocess.run(["mount", *args], check=True, capture_output=True)
        self._mounted.append(target)

    def console(self) -> str:
        try:
            return (self.base / "console.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def alive(self) -> bool:
        """Return True while the container's systemd-nspawn runs."""
        return self.nspawn is not None and self.nspawn.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole container at once, as a host that loses power: nothing inside gets to react.

        Its PID 1 first: the kernel then kills every process of its PID namespace together.
        Then systemd-nspawn's process group (nspawn and what it forked outside the container).
        The mounts stay until `teardown`.
        """
        if self.leader is not None:
            try:
                os.kill(self.leader, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.nspawn is not None and self.nspawn.poll() is None:
            try:
                os.killpg(self.nspawn.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.nspawn.wait(15)

    def teardown(self) -> None:
        """Stop the container and remove every trace; kills only the processes this object started."""
        if self.nspawn is not None and self.nspawn.poll() is None:
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.nspawn.pid, signal.SIGKILL)
                self.nspawn.wait(15)
        for target in reversed(self._mounted):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)
        # systemd-nspawn 257 (Debian 13) makes this mount point for the machine's name and removes
        # it when it exits cleanly; one SIGKILLed (`kill`) leaves it, and the next container of that
        # name then refuses to start ("Mount point ... exists already").
        export = Path("/run/systemd/nspawn/unix-export") / self.machine
        if export.exists():
            subprocess.run(["umount", "-l", str(export)], capture_output=True)
            shutil.rmtree(export, ignore_errors=True)

    # -- use -----------------------------------------------------------------------------------

    def run(self, *cmd: str, check: bool = True, timeout: float = 60, env: dict | None = None,
            user: str | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        """Run `cmd` inside the container (all namespaces), with a clean environment plus `env`."""
        environment = [f"{k}={v}" for k, v in {"PATH": CONTAINER_PATH, "LANG": "C.UTF-8", **(env or {})}.items()]
        prefix = ["nsenter", "-t", str(self.leader), "-a", "env", "-i", *environment]
        if user:
            prefix += ["runuser", "-u", user, "--"]
        proc = subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write a file inside the container (not under /tmp or /run: those are fresh tmpfs inside)."""
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def copytree(self, source: Path, path: str) -> None:
        target = self.root / path.lstrip("/")
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)

    def show(self, unit: str, *props: str) -> dict[str, str]:
        """Return `systemctl show UNIT -p PROPS` as a dict."""
        out = self.run("systemctl", "show", unit, "-p", ",".join(props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, unit: str) -> str:
        return self.run("journalctl", "-u", unit, "--no-pager", "-o", "cat", check=False).stdout


def boot_all(containers: Iterable[Container], timeout: float = 90) -> None:
    """Boot `containers` in parallel (each takes about 10 s); raise the first failure, if any."""
    errors: list[BaseException] = []

    def boot(c: Container) -> None:
        try:
            c.boot(timeout)
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=boot, args=(c,), name=f"boot-{c.machine}") for c in containers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def container_until(predicate, what: str, timeout: float = 60.0):
    """Poll `predicate` inside the container until it is truthy; fail after `timeout` seconds."""
    return wait_for(predicate, timeout=timeout, interval=0.2, message=what)


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


def q(c: Container, *args: str, check: bool = True, user: str | None = None) -> subprocess.CompletedProcess:
    """Run the installed queuectl inside container `c` (it finds the service's database in queuectl.conf)."""
    return c.run("queuectl", *args, check=check, user=user)
