"""debian/tests, as Debian's CI would run them: autopkgtest installs the .deb built from this tree
(`make deb`) in a booted guest of each release and runs each test there as root, rebooting where a test asks
(autopkgtest-reboot). Both releases run at once (a guest uses one core); each test's item says PASS, or fails
with the test's own output and the guest's console log.

One autopkgtest run per release (its summary has a line per test); a test that breaks the testbed gets a fresh
guest from the same image.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import require
from system.container import RELEASES

from . import images

REPO = Path(__file__).resolve().parents[2]
CONTROL = REPO / "debian/tests/control"
#: The tests of debian/tests/control, in its order (none where the tests are copied without it: the package
#: build's).
TESTS = tuple(name for line in (CONTROL.read_text().splitlines() if CONTROL.exists() else ())
              if line.startswith("Tests:") for name in line.split(":", 1)[1].split())
#: Seconds one release's autopkgtest run may take (its guests boot in about 30 s each under TCG).
RUN_TIMEOUT = 1500


def selected(session) -> dict[str, list[str]]:
    """{release: [test, ...]} of the test_dep8 items this session runs (`-k "bookworm and reboot"` runs one)."""
    chosen: dict[str, list[str]] = {}
    for item in session.items:
        params = getattr(item, "callspec", None)
        if item.originalname == "test_dep8" and params is not None:
            chosen.setdefault(params.params["release"], []).append(params.params["name"])
    return chosen


@pytest.fixture(scope="session")
def runs(request, deb, tmp_path_factory):
    """Start autopkgtest for each release with tests selected, all at once, and return {release: (exit code,
    its output directory, the guests' console log, seconds)} once all have ended."""
    require(images.missing(), "guests")
    chosen = selected(request.session)
    try:
        made = {release: images.image(release) for release in chosen}
    except RuntimeError as e:
        require(f"an image cannot be made: {e}", "guests")
    accel = "kvm" if images.kvm_runs(next(iter(made.values()))) else "tcg"
    # autopkgtest copies the source tree into each guest: its debian/ folder is all the tests use.
    tree = tmp_path_factory.mktemp("dep8-tree")
    shutil.copytree(REPO / "debian", tree / "debian")
    started = {}
    for release, image in made.items():
        out = tmp_path_factory.mktemp(f"dep8-{release}")
        console = out.parent / f"{out.name}-console.log"
        env = {**os.environ, "QUEUECTL_GUEST_ACCEL": accel, "QUEUECTL_GUEST_KERNEL": str(image.kernel),
               "QUEUECTL_GUEST_INITRD": str(image.initrd), "QUEUECTL_GUEST_CONSOLE": str(console),
               "QUEUECTL_GUEST_APPEND": "root=/dev/vda rw console=ttyS0"}
        names = [f"--test-name={name}" for name in chosen[release]] if len(chosen[release]) < len(TESTS) else []
        argv = ["autopkgtest", "--output-dir", str(out / "result"), *names, str(deb), f"{tree}/", "--",
                "qemu", f"--qemu-command={images.QEMU_COMMAND}", "--boot=none", "--ram-size=1536",
                "--timeout-reboot=300", str(image.disk)]
        log = open(out / "autopkgtest.log", "w")
        started[release] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out),
                            out, console, time.monotonic(), log)
    results = {}
    for release, (proc, out, console, began, log) in started.items():
        try:
            code = proc.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        log.close()
        results[release] = (code, out, console, time.monotonic() - began)
        print(f"\n{release}: autopkgtest ({accel}) exited {code} in {results[release][3]:.0f} s")
    return results


def verdict(out: Path, name: str) -> str:
    """The summary's verdict of test `name` (PASS, FAIL ..., SKIP ...), or "" if it has none."""
    summary = out / "result" / "summary"
    text = summary.read_text() if summary.exists() else ""
    found = re.search(rf"^{re.escape(name)}\s+(.+)$", text, re.M)
    return found.group(1).strip() if found else ""


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", TESTS)
def test_dep8(runs, release, name):
    code, out, console, _ = runs[release]
    said = verdict(out, name)
    if said != "PASS":
        log = out / "result" / f"{name}-stdout"
        errors = out / "result" / f"{name}-stderr"
        shown = "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-6000:]}" for p in (log, errors)
                        if p.exists())
        whole = (out / "autopkgtest.log").read_text(errors="replace")
        pytest.fail(f"{release}: DEP-8 test {name}: {said or 'no verdict'} (autopkgtest exited {code}){shown}\n"
                    f"--- autopkgtest's log (end)\n{whole[-6000:]}\n--- the guests' console (end)\n"
                    f"{console.read_text(errors='replace')[-4000:] if console.exists() else '(none)'}")
