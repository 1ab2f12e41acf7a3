"""Stop signals for the worker: handlers only record the signal and wake the main loop."""

from __future__ import annotations

import signal
import socket
from contextlib import contextmanager
from typing import Callable, Iterator

#: SIGHUP too: a closed terminal or ssh session drains the worker instead of killing it mid-job.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextmanager
def on_stop(callback: Callable[[int], None]) -> Iterator[socket.socket]:
    """Call `callback(signum)` on SIGTERM, SIGINT or SIGHUP while the block runs; restore handlers after.

    Yields a socket that becomes readable when a signal arrives (signal.set_wakeup_fd),
    for the caller's select loop; the caller drains it with `drain`.
    """
    rsock, wsock = socket.socketpair()
    rsock.setblocking(False)
    wsock.setblocking(False)
    old_fd = signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
    old = {sig: signal.signal(sig, lambda signum, frame: callback(signum)) for sig in STOP_SIGNALS}
    try:
        yield rsock
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(old_fd)
        rsock.close()
        wsock.close()


def drain(sock: socket.socket) -> None:
    """Empty a wake-up socket."""
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass
