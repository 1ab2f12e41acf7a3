"""Process state read from /proc, for tests that watch real processes and their groups."""

from __future__ import annotations

import os


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, process group) of `pid` from /proc/PID/stat, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[2])


def gone(pid: int) -> bool:
    """True if process `pid` no longer runs (absent, or a zombie waiting to be reaped)."""
    st = _stat(pid)
    return st is None or st[0] in "ZX"


def live_members(pgid: int) -> list[int]:
    """Pids of the running (non-zombie) processes of group `pgid`."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[1] == pgid and st[0] not in "ZX":
                out.append(int(name))
    return out


def tcp_ports(pid: int) -> set[int]:
    """The local ports of the TCP sockets (IPv4 and IPv6) that process `pid` holds (proc(5): its descriptors, then
    /proc/PID/net/tcp and tcp6 by inode); an empty set once it has exited."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # it has exited
        return set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # a descriptor closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:  # no such table (no IPv6 here), or it has exited
            continue
        ports |= {int(row[1].rsplit(":", 1)[1], 16) for row in rows if row[9] in inodes}
    return ports
