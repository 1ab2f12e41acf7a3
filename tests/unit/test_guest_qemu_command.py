"""The guests tier's QEMU wrapper (tests/guests/qemu-command) run for real, with a stand-in
qemu-system-x86_64 on PATH that prints the arguments it was given: the command lines that autopkgtest 5.28
(Debian 12) and 5.49 (Debian 13) pass, rewritten to TCG, a restricted network and the console log."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[1] / "guests" / "qemu-command"


def wrapped(tmp_path, *argv: str, accel: str = "tcg") -> list[str]:
    stand_in = tmp_path / "bin" / "qemu-system-x86_64"
    stand_in.parent.mkdir(exist_ok=True)
    stand_in.write_text('#!/usr/bin/python3\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n')
    stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{stand_in.parent}:{os.environ['PATH']}", "QUEUECTL_GUEST_ACCEL": accel,
           "QUEUECTL_GUEST_CONSOLE": str(tmp_path / "console.log")}
    done = subprocess.run([str(WRAPPER), *argv], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("nic, user, kept", [
    (["-net", "nic,model=virtio"], ["-net", "user,hostfwd=tcp:127.0.0.1:10022-:22"], "user,restrict=on"),
    (["-device", "virtio-net-pci,netdev=net0"], ["-netdev", "user,id=net0,hostfwd=tcp:127.0.0.1:10022-:22"],
     "user,id=net0,restrict=on"),
], ids=["autopkgtest-5.28", "autopkgtest-5.49"])
def test_the_network_is_restricted_with_no_forwarded_port_in_either_form(tmp_path, nic, user, kept):
    args = wrapped(tmp_path, "-enable-kvm", "-cpu", "kvm64,+vmx", *nic, *user, "-m", "1536")
    assert args[:6] == ["-accel", "tcg", "-vga", "none", "-parallel", "none"]
    assert kept in args and args[args.index(kept) - 1] == user[0]
    assert nic[1] in args  # the device that names the network is kept
    assert not [a for a in args if "hostfwd" in a or "kvm" in a]


def test_the_first_serial_port_is_logged_to_the_console_file(tmp_path):
    args = wrapped(tmp_path, "-serial", f"unix:{tmp_path}/ttyS0,server=on,wait=off")
    assert args[args.index("-chardev") + 1] == (f"socket,id=console0,path={tmp_path}/ttyS0,server=on,wait=off,"
                                                f"logfile={tmp_path}/console.log,logappend=on")
    assert args[args.index("-serial") + 1] == "chardev:console0"
