"""debian/tests, as Debian's CI would run them: autopkgtest installs the .deb built from this tree
(`make deb`) in a booted guest of each release and runs each test there as root, rebooting where a test asks
(autopkgtest-reboot). The runs start in the background once the session is collected (tests/guests/runs.py,
conftest.py) and these items, run last, read their verdicts: PASS, or a failure with the test's own output,
autopkgtest's log and the guest's console.

One autopkgtest run per release (its summary has a line per test); a test that breaks the testbed gets a fresh
guest from the same image.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from system.container import RELEASES

from .runs import TESTS


@pytest.fixture(scope="session")
def runs(request):
    """{release: Run} of the background runs, once all have ended (tests/guests/runs.py)."""
    results = request.config._queuectl_dep8.wait()
    for release, run in results.items():
        print(f"\n{release}: autopkgtest ({request.config._queuectl_dep8.accel}) exited {run.code} in "
              f"{run.seconds:.0f} s")
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
    run = runs[release]
    said = verdict(run.out, name)
    if said != "PASS":
        log = run.out / "result" / f"{name}-stdout"
        errors = run.out / "result" / f"{name}-stderr"
        shown = "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-6000:]}" for p in (log, errors)
                        if p.exists())
        whole = (run.out / "autopkgtest.log").read_text(errors="replace")
        pytest.fail(f"{release}: DEP-8 test {name}: {said or 'no verdict'} (autopkgtest exited {run.code}){shown}\n"
                    f"--- autopkgtest's log (end)\n{whole[-6000:]}\n--- the guest's console (end)\n"
                    f"{run.console.read_text(errors='replace')[-4000:] if run.console.exists() else '(none)'}")
