"""A throwaway systemd container booted from an overlay of this machine's root (tier 3 tests).

Recipe: ../shared/systemd-container.md. Everything written inside lands on a tmpfs and
vanishes at teardown; the host's installed packages are visible inside.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def missing_prerequisites() -> str | None:
    """Return why a container cannot be booted here, or None if it can."""
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn and mounts)"
    for tool in ("systemd-nspawn", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install systemd-container util-linux)"
    if not Path("/lib/systemd/systemd").exists():
        return "systemd is not installed (apt-get install systemd)"
    return None


class Container:
    """One booted container. `run` executes a command inside with a clean environment."""

    def __init__(self):
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
                     f"lowerdir=/,upperdir={rw}/upper,workdir={rw}/work", str(self.root)], self.root)
        console = open(self.base / "console.log", "wb")
        self.nspawn = subprocess.Popen(
            ["systemd-nspawn", "-D", str(self.root), "--boot", "--register=no", "--keep-unit",
             f"--machine=qtest-{os.getpid()}"],
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
