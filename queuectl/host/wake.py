"""Wake idle workers when work arrives: one datagram to each worker on this host.

Each worker binds an abstract AF_UNIX datagram socket named after its pid (unix(7):
abstract names need no file and vanish with the socket). A SQLite write transaction that
makes jobs ready or requests a cancel (enqueue, retry, dlq retry, resume, cancel) sends one
byte to each local worker once it committed (SqliteStore._write); a worker that gets it
claims, and looks for cancel requests, at once instead of at its next poll. Nothing depends on the datagram arriving:
polling every poll-interval stays the fallback (another host, a full buffer, a worker
in another network namespace).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable
from queuectl.domain.errors import QueuectlError
from queuectl.host import procs

# Sockets come from `_socket`, the C module under `socket`, imported where one is made: `queuectl enqueue`
# sends at most a datagram per local worker (none when none runs), and the `socket` wrapper's enums and
# selectors set-up would cost it a measurable share of its start-up.
if TYPE_CHECKING:
    import _socket


def address(pid: int) -> bytes:
    """The abstract socket address of the worker with this pid."""
    return b"\0queuectl-worker-%d" % pid


def listen(pid: int) -> "_socket.socket | None":
    """Bind this worker's wake-up socket (non-blocking); None if the name is taken or unsupported."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    try:
        sock.bind(address(pid))
    except OSError:
        sock.close()
        return None
    sock.setblocking(False)
    return sock


def wake_local_workers(store) -> None:
    """Wake the workers of `store` that run on this host and boot by a datagram each, so that they claim, or look
    for cancel requests, at once rather than at their next poll or heartbeat: the after-commit hook that callers
    hand to queuectl.store.open_store. Never raises: the poll is the fallback, and the work is committed already."""
    try:
        poke(pid for pid, boot in store.worker_pids(procs.hostname()) if procs.same_boot(boot))
    except (QueuectlError, OSError):
        pass


def poke(pids: Iterable[int]) -> int:
    """Send a wake-up to each pid's worker socket; return how many were delivered. Never raises."""
    pids = list(pids)
    if not pids:
        return 0
    import _socket

    delivered = 0
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        for pid in pids:
            try:
                sock.sendto(b"!", address(pid))
                delivered += 1
            except OSError:
                pass  # no such worker here, or its buffer is full: it is awake anyway
    finally:
        sock.close()
    return delivered
