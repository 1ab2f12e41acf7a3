"""The two simulated hosts are apart where queuectl looks: hostname, boot id and PID namespace."""

from __future__ import annotations

import os




def this_machine() -> dict[str, str]:
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot_id = f.read().strip()
    return {"hostname": os.uname().nodename, "boot_id": boot_id, "pid_ns": os.readlink("/proc/self/ns/pid")}


def btime(text: str) -> str:
    return next(line.split()[1] for line in text.splitlines() if line.startswith("btime "))


def test_each_host_has_its_own_hostname_boot_id_and_pid_namespace(hosts, figures):
    a, b = hosts
    seen = {"this machine": this_machine(), a.name: a.identity(), b.name: b.identity()}
    # What a worker sees: it runs as a transient unit, not in the shell that nsenter gives.
    in_units = {a.name: a.identity(unit=True), b.name: b.identity(unit=True)}
    # A unit sandboxed as queuectl-worker@.service is (ProtectKernelTunables=) sees the kernel's
    # boot id instead, the same on both hosts: why the workers here run in plain transient units.
    sandboxed = [h.identity(unit=True, properties=("ProtectKernelTunables=yes",))["boot_id"] for h in hosts]
    # The kernel's boot time (queuectl's fallback in procs.same_boot): one kernel, one btime.
    with open("/proc/stat") as f:
        btimes = {"this machine": btime(f.read()), a.name: btime(a.run("cat", "/proc/stat").stdout),
                  b.name: btime(b.run("cat", "/proc/stat").stdout)}

    for where, ident in seen.items():
        figures.add(where, " ".join(ident.values()))
    figures.add("btime (this machine, A, B)", " ".join(btimes.values()))
    figures.add("boot id in a ProtectKernelTunables= unit (A, B)", " ".join(sandboxed))

    assert seen[a.name]["hostname"] == "host-a" and seen[b.name]["hostname"] == "host-b"
    for key in ("hostname", "boot_id", "pid_ns"):
        values = [ident[key] for ident in seen.values()]
        assert len(set(values)) == 3, f"{key} is shared: {seen}"
    assert in_units == {a.name: seen[a.name], b.name: seen[b.name]}, in_units
    assert len(set(btimes.values())) == 1, btimes
