"""Process identity on Linux: start times, boot id, and process-group checks that resist PID reuse."""

from __future__ import annotations

import os
import time
from functools import lru_cache

from queuectl.domain import clock

#: This boot's identity and its CLOCK_MONOTONIC's, kept with the clocks (queuectl.domain.clock) and named here too.
boot_id = clock.boot_id
clock_domain = clock.clock_domain


def process_start_time(pid: int) -> int | None:
    """Return the process's start time in clock ticks since boot, or None if it does not exist.

    Source: proc(5), /proc/PID/stat field 22 (starttime). A pid and its start time
    together name one process for the life of a boot, so a recycled pid is told apart.
    """
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def _stat_fields(pid: int) -> list[bytes] | None:
    """Return the fields of /proc/PID/stat after comm (state first), or None if the process does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    return data[data.rfind(b")") + 2:].split()


@lru_cache(maxsize=1)
def pid_namespace() -> str:
    """Return this process's PID namespace ("pid:[INODE]", proc(5) /proc/self/ns/pid; "" if unreadable).

    A pid names a process only within its namespace: a worker signals or judges by pid
    only the workers of its own namespace.
    """
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def same_boot(recorded: str) -> bool:
    """Return True if a boot identity recorded by boot_id() (here or in another namespace) is this boot's.

    Equal boot ids decide; otherwise boot times within 2 s of each other do (a reboot
    takes longer than that).
    """
    mine_id, _, mine_btime = boot_id().partition(" ")
    their_id, _, their_btime = recorded.partition(" ")
    if their_id and their_id == mine_id:
        return True
    try:
        return abs(int(their_btime) - int(mine_btime)) <= 2
    except ValueError:
        return False


@lru_cache(maxsize=1)
def hostname() -> str:
    """Return this host's name (uname(2)'s nodename, what gethostname(2) returns on Linux)."""
    return os.uname().nodename


def identity() -> dict:
    """Return this process as a registration records it (is_local and owner_alive compare against it): the host,
    its boot, this pid with its start time and PID namespace, and the effective uid."""
    pid = os.getpid()
    return {"host": hostname(), "boot_id": boot_id(), "pid": pid, "pid_start": process_start_time(pid),
            "pid_ns": pid_namespace(), "uid": os.geteuid()}


def is_local(host: str, boot: str, pid_ns: str | None = None) -> bool:
    """Return True if (host, boot, PID namespace) names this host in its current boot, pids comparable.

    `pid_ns` None (a registration from before it was recorded) is taken as this namespace.
    """
    return host == hostname() and same_boot(boot) and pid_ns in (None, pid_namespace())


def owner_alive(host: str, boot: str, pid: int, pid_start: int | None, pid_ns: str | None = None) -> bool | None:
    """Return whether the process (host, boot, pid, start time) lives; None if this process cannot tell.

    None: it ran on another host, in another PID namespace, or in what cannot be told
    for this boot (another boot id and another boot time: an earlier boot, or this one
    seen from another namespace after a wall-clock step moved the boot time), where
    only its heartbeat can tell. False: its pid is gone or names another process now.
    """
    if host != hostname() or pid_ns not in (None, pid_namespace()) or not same_boot(boot):
        return None
    return process_alive(pid, pid_start)


def process_alive(pid: int, start_time: int | None) -> bool:
    """Return True if process `pid` runs and (when given) started at `start_time` ticks.

    A zombie (state Z or X) has exited, waiting only for its parent to reap it: not alive.
    A process that /proc hides from this user (a service with ProtectProc=invisible looking
    at another user's worker) but kill(2) finds is taken as alive: its start time cannot
    be checked, and a live worker must never be taken for a dead one.
    """
    fields = _stat_fields(pid)
    if fields is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists and is another user's
        return True
    if fields[0] in (b"Z", b"X"):
        return False
    return start_time is None or int(fields[19]) == start_time


def group_alive(pgid: int, leader_start: int | None) -> bool:
    """Return True if the process group `pgid`, begun by a leader started at `leader_start`, has a live member.

    If the leader still exists its start time must match. If it has exited but members
    remain, the group is still the original one: Linux does not hand out a pid while it
    is in use as a process group id (credentials(7)). Zombies do not count as members.
    """
    leader = process_start_time(pgid)
    if leader is not None and leader_start is not None and leader != leader_start:
        return False  # the pid was handed out again, so the recorded group is gone
    return any(state != b"Z" for state in _group_member_states(pgid))


def _group_member_states(pgid: int):
    """Yield the state letter of every process in group `pgid` (proc(5): stat fields 3 and 5)."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[2]) == pgid:
                yield fields[0]


def groups_with_env(*entries: bytes) -> set[int]:
    """Return the process groups of this user's processes whose environment holds every b"KEY=VALUE" of `entries`.

    The fallback for a job whose group was never recorded: its shell and children carry
    QUEUECTL_JOB_ID in their environment (proc(5): /proc/PID/environ, readable for one's
    own processes).
    """
    groups = set()
    for proc in os.scandir("/proc"):
        if not proc.name.isdigit():
            continue
        try:
            with open(f"/proc/{proc.name}/environ", "rb") as f:
                environ = set(f.read().split(b"\0"))
            if not environ.issuperset(entries):
                continue
        except OSError:
            continue
        fields = _stat_fields(int(proc.name))
        if fields is not None and fields[0] not in (b"Z", b"X"):
            groups.add(int(fields[2]))
    return groups


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to process group `pgid`; return False if the group is gone.

    Raises PermissionError if the group belongs to another user.
    """
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def kill_group(pgid: int, leader_start: int | None) -> bool:
    """SIGKILL the group if it is still the one recorded and wait for it (kill_and_wait); True once it is gone.

    Raises PermissionError if the group belongs to another user.
    """
    if group_alive(pgid, leader_start):
        return kill_and_wait(pgid)
    return True


def kill_and_wait(pgid: int, wait: float = 2.0) -> bool:
    """SIGKILL process group `pgid` and wait up to `wait` seconds until no member runs.

    Returns True once the group is gone (or was already), False if a member still runs
    after `wait` (one stuck in uninterruptible sleep, on a hung NFS mount say). kill(2)
    returns before the members have died: a recovery that reran the job at once could
    meet the old copy still holding its files and locks. A zombie has released them.
    Raises PermissionError if the group belongs to another user.
    """
    from signal import SIGKILL  # here: the module's enums cost every command's start-up (procs is on enqueue's path)

    signal_group(pgid, SIGKILL)
    deadline = time.monotonic() + wait
    while any(state != b"Z" for state in _group_member_states(pgid)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def may_signal_group(pgid: int) -> bool:
    """Return False if process group `pgid` exists and belongs to another user (kill(2) with signal 0).

    Also answers for a group that /proc hides from this user (ProtectProc=invisible).
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return True
