"""tests/guests/virt-qemu, the guests' virt server: autopkgtest-virt-qemu's fixed allowances (every one goes through
VirtSubproc.timeout_start) multiplied by QUEUECTL_GUEST_PATIENCE, the virt server itself run unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[1] / "guests" / "virt-qemu"
LIB = Path("/usr/share/autopkgtest/lib/VirtSubproc.py")

# Loads the wrapper as a module (the virt server is not started), then arms one allowance of 5 s and prints the
# seconds the alarm was set to, and the server it would run.
PROBE = """
import signal, sys
wrapper = {"__name__": "virt_qemu"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), wrapper)
import VirtSubproc
VirtSubproc.timeout_start(5)
print(signal.alarm(0), wrapper["SERVER"])
"""


@pytest.mark.skipif(not LIB.exists(), reason="autopkgtest is not installed (apt-get install autopkgtest)")
@pytest.mark.parametrize("patience, seconds", [(None, 20), ("1", 5), ("6", 30)])
def test_every_allowance_is_scaled_and_the_virt_server_run_as_it_is(patience, seconds):
    env = {k: v for k, v in os.environ.items() if k != "QUEUECTL_GUEST_PATIENCE"}
    if patience is not None:
        env["QUEUECTL_GUEST_PATIENCE"] = patience
    out = subprocess.run([sys.executable, "-c", PROBE, str(WRAPPER)], capture_output=True, text=True, env=env,
                         timeout=30, check=True).stdout.split(maxsplit=1)
    assert int(out[0]) in (seconds, seconds - 1)  # what is left of the alarm: the allowance, scaled
    assert out[1].strip() == "/usr/bin/autopkgtest-virt-qemu"


@pytest.mark.skipif(not LIB.exists(), reason="autopkgtest is not installed (apt-get install autopkgtest)")
def test_the_virt_server_runs_through_it():
    r = subprocess.run([str(WRAPPER), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("usage: autopkgtest-virt-qemu"), r


class Socket:
    """What the guest's shell wrote, read as one block (as a host that reads late gets it), then nothing more."""

    def __init__(self, data: bytes):
        self.blocks = [data]

    def recv(self, n: int) -> bytes:
        if self.blocks:
            return self.blocks.pop(0)
        import time
        time.sleep(0.05)
        return b""


@pytest.mark.skipif(not LIB.exists(), reason="autopkgtest is not installed (apt-get install autopkgtest)")
def test_a_prompt_read_with_pythons_path_is_not_waited_for_again():
    wrapper = {"__name__": "virt_qemu"}
    exec(compile(WRAPPER.read_text(), str(WRAPPER), "exec"), wrapper)
    import VirtSubproc

    out = VirtSubproc.expect(Socket(b"python3 is /usr/bin/python3\r\n1b2c[3]# "), b"/python", 30)
    assert b"\n# " not in out  # 5.28 waits for another prompt then
    assert VirtSubproc.expect(Socket(b""), b"# ", 1) == b"# "  # at once: it came with the path
    with pytest.raises(VirtSubproc.Timeout):  # a prompt not yet read is waited for, as before
        VirtSubproc.expect(Socket(b"still running"), b"# ", 1)
