"""The guests tier's autopkgtest runs, started in the background as soon as the session knows it has DEP-8
tests to run, so that booted guests (one CPU each, under TCG a whole one) run beside the other tiers
instead of after them; the tier's items, ordered last, wait for their results.

First the .deb (conftest.built_deb, which the system tier shares), built while the releases' images are
made (tests/guests/images.py), then one autopkgtest run per release with its selected tests, at most
`os.cpu_count() - 1` at a time (one on these 2-core machines: a CPU is left to the rest of the suite),
and all that are left at once when the tier's items begin to wait (nothing else runs then).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from conftest import built_deb, require

from . import images

REPO = Path(__file__).resolve().parents[2]
CONTROL = REPO / "debian/tests/control"
#: The tests of debian/tests/control, in its order (none where the tests are copied without it: the package
#: build's).
TESTS = tuple(name for line in (CONTROL.read_text().splitlines() if CONTROL.exists() else ())
              if line.startswith("Tests:") for name in line.split(":", 1)[1].split())
#: Seconds one release's autopkgtest run may take (its guests boot in about 30 s each under TCG).
RUN_TIMEOUT = 1800


class Run(NamedTuple):
    """One release's autopkgtest run: its exit code, output directory, guests' console log and seconds."""

    code: int
    out: Path
    console: Path
    seconds: float


class Runs:
    """The autopkgtest runs of `chosen` ({release: [test, ...]}), under `base` (a fresh directory)."""

    def __init__(self, chosen: dict[str, list[str]], base: Path):
        self.chosen, self.base = chosen, base
        self.results: dict[str, Run] = {}
        self.error: BaseException | None = None
        self.accel = "tcg"
        self._procs: list[subprocess.Popen] = []
        self._stopped = False
        self._hurry = threading.Event()  # the session waits: start every run left
        self._thread = threading.Thread(target=self._work, name="dep8", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait(self) -> dict[str, Run]:
        """Return {release: Run} once every run has ended; raise what stopped them (a skip or a failure)."""
        self._hurry.set()
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.results

    def stop(self) -> None:
        """End the runs still going (the session ends early), their guests with them."""
        self._stopped = True
        self._hurry.set()
        for proc in self._procs:
            _end(proc)

    def _work(self) -> None:
        try:
            require(images.missing(), "guests")
            # The images (made at once where none is kept: debootstrap waits on the archive as much as on a
            # CPU) while the .deb is built.
            with ThreadPoolExecutor(len(self.chosen)) as pool:
                making = [pool.submit(images.image, release) for release in self.chosen]
                deb = built_deb()
            try:
                made = dict(zip(self.chosen, (future.result() for future in making)))
            except RuntimeError as e:
                require(f"an image cannot be made: {e}", "guests")
            self.accel = "kvm" if images.kvm_runs(next(iter(made.values()))) else "tcg"
            # autopkgtest copies the source tree into each guest: its debian/ folder is all the tests use.
            tree = self.base / "tree"
            shutil.copytree(REPO / "debian", tree / "debian")
            at_once = max(1, (os.cpu_count() or 2) - 1)
            pending, running = list(made.items()), {}
            while pending or running:
                while pending and not self._stopped and (len(running) < at_once or self._hurry.is_set()):
                    release, image = pending.pop(0)
                    running[release] = self._start(release, image, deb, tree)
                for release, (proc, out, console, began, log) in list(running.items()):
                    if proc.poll() is None and time.monotonic() - began > RUN_TIMEOUT:
                        _end(proc)
                    if proc.poll() is not None:
                        log.close()
                        self.results[release] = Run(proc.wait(), out, console, time.monotonic() - began)
                        del running[release]
                if self._stopped and not running:
                    break
                self._hurry.wait(1) if pending else time.sleep(1)
        except BaseException as e:  # pytest's skip and fail among them: wait() raises it in the tests
            self.error = e

    def _start(self, release: str, image: images.Image, deb: Path, tree: Path):
        out = self.base / release
        out.mkdir()
        console = self.base / f"{release}-console.log"
        env = {**os.environ, "QUEUECTL_GUEST_ACCEL": self.accel, "QUEUECTL_GUEST_KERNEL": str(image.kernel),
               "QUEUECTL_GUEST_INITRD": str(image.initrd), "QUEUECTL_GUEST_CONSOLE": str(console),
               "QUEUECTL_GUEST_APPEND": "root=/dev/vda rw console=ttyS0"}
        names = self.chosen[release]
        only = [f"--test-name={name}" for name in names] if len(names) < len(TESTS) else []
        argv = ["autopkgtest", "--output-dir", str(out / "result"), *only, str(deb), f"{tree}/", "--",
                "qemu", f"--qemu-command={images.QEMU_COMMAND}", "--boot=none", "--ram-size=1536",
                "--timeout-reboot=300", str(image.disk)]
        log = open(out / "autopkgtest.log", "w")
        # A session of its own: ending it ends autopkgtest-virt-qemu and QEMU too (_end).
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out, start_new_session=True)
        self._procs.append(proc)
        return proc, out, console, time.monotonic(), log


def _end(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """End an autopkgtest run and everything it started: SIGTERM to its process group (autopkgtest then stops
    its guest and removes its files), SIGKILL after `grace` seconds."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue
