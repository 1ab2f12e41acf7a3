"""The guests tier's autopkgtest runs, started in the background as soon as the session knows it has DEP-8
tests to run, so that booted guests (one CPU each, under TCG a whole one) run beside the other tiers
instead of after them; the tier's items, ordered last, wait for their results.

First the .deb (support.suite.built_deb, which the system tier shares), built while the releases' images are
made (tests/guests/images.py), then one autopkgtest run per release with its selected tests, at most
`os.cpu_count() - 1` at a time (one on these 2-core machines: a CPU is left to the rest of the suite),
and all that are left at once when the tier's items begin to wait (nothing else runs then): Batch.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import NamedTuple

from support.suite import built_deb, require

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


class Batch:
    """Processes run at most `at_once` at a time, in the order given; every one left starts at once after
    `hurry()`. Each is ended with its process group (_end) after `timeout` seconds. `stop()` starts no more
    and ends those running. Nothing polls: a thread waits on each process and wakes the scheduler."""

    def __init__(self, at_once: int, timeout: float):
        self.at_once, self.timeout = at_once, timeout
        self._wake: queue.SimpleQueue = queue.SimpleQueue()  # None (hurry or stop), or (key, code, seconds)
        self._lock = threading.Lock()
        self._hurried = self._stopped = False
        self._procs: list[subprocess.Popen] = []

    def hurry(self) -> None:
        self._hurried = True
        self._wake.put(None)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            procs = list(self._procs)
        self._wake.put(None)
        for proc in procs:
            _end(proc)

    def run(self, starts: dict[str, Callable[[], subprocess.Popen]]) -> dict[str, tuple[int, float]]:
        """Start each of `starts` (a callable that starts a process in a session of its own) in turn; return
        {key: (exit code, seconds)} of those started, once all have ended (a negative code: the signal
        that ended it). Keys never started (after stop()) are missing."""
        pending, running, ended = list(starts.items()), 0, {}
        while pending or running:
            while pending and not self._stopped and (running < self.at_once or self._hurried):
                key, start = pending.pop(0)
                proc = start()
                with self._lock:
                    self._procs.append(proc)
                    stopped = self._stopped
                if stopped:  # stop() came while it started, and did not see it
                    _end(proc)
                threading.Thread(target=self._watch, args=(key, proc), name=f"batch-{key}", daemon=True).start()
                running += 1
            if self._stopped and not running:
                break
            woke = self._wake.get()
            if woke is not None:
                key, code, seconds = woke
                ended[key] = (code, seconds)
                running -= 1
        return ended

    def _watch(self, key: str, proc: subprocess.Popen) -> None:
        began = time.monotonic()
        try:
            code = proc.wait(self.timeout)
        except subprocess.TimeoutExpired:
            _end(proc)
            code = proc.wait()
        self._wake.put((key, code, time.monotonic() - began))


class Runs:
    """The autopkgtest runs of `chosen` ({release: [test, ...]}), under `base` (a fresh directory)."""

    def __init__(self, chosen: dict[str, list[str]], base: Path):
        self.chosen, self.base = chosen, base
        self.results: dict[str, Run] = {}
        self.error: BaseException | None = None
        self.accel = "tcg"
        self._batch = Batch(max(1, (os.cpu_count() or 2) - 1), RUN_TIMEOUT)
        self._thread = threading.Thread(target=self._work, name="dep8", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait(self) -> dict[str, Run]:
        """Return {release: Run} once every run has ended; raise what stopped them (a skip or a failure)."""
        self._batch.hurry()
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.results

    def stop(self) -> None:
        """End the runs still going (the session ends early), their guests with them."""
        self._batch.stop()

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
            ended = self._batch.run({release: partial(self._start, release, image, deb, tree)
                                     for release, image in made.items()})
            for release, (code, seconds) in ended.items():
                self.results[release] = Run(code, self.base / release, self.base / f"{release}-console.log",
                                            seconds)
        except BaseException as e:  # pytest's skip and fail among them: wait() raises it in the tests
            self.error = e

    def _start(self, release: str, image: images.Image, deb: Path, tree: Path) -> subprocess.Popen:
        out = self.base / release
        out.mkdir()
        env = {**os.environ, "QUEUECTL_GUEST_ACCEL": self.accel, "QUEUECTL_GUEST_KERNEL": str(image.kernel),
               "QUEUECTL_GUEST_INITRD": str(image.initrd),
               "QUEUECTL_GUEST_CONSOLE": str(self.base / f"{release}-console.log"),
               "QUEUECTL_GUEST_APPEND": "root=/dev/vda rw console=ttyS0"}
        names = self.chosen[release]
        only = [f"--test-name={name}" for name in names] if len(names) < len(TESTS) else []
        argv = ["autopkgtest", "--output-dir", str(out / "result"), *only, str(deb), f"{tree}/", "--",
                str(images.VIRT_QEMU), f"--qemu-command={images.QEMU_COMMAND}", "--boot=none", "--ram-size=1536",
                "--timeout-reboot=300", str(image.disk)]
        # A session of its own: ending it ends autopkgtest-virt-qemu and QEMU too (_end).
        with open(out / "autopkgtest.log", "w") as log:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out,
                                    start_new_session=True)


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
