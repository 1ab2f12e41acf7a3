"""Detach a worker from its terminal with python-daemon (PEP 3143), for hosts without systemd."""

from __future__ import annotations

import os

from queuectl.host import procs
from queuectl.domain.errors import Conflict, InvalidInput


def _clear_stale_pidfile(path: str) -> None:
    """Remove a pidfile left by a daemon that is gone; raise Conflict if its process still runs."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return
    except OSError as e:
        raise InvalidInput(f"cannot read pidfile {path}: {e.strerror}") from None
    if text.isdigit() and procs.process_alive(int(text), None):
        raise Conflict(f"pidfile {path} names a running process (pid {text})")
    os.unlink(path)


def detach(pidfile: str | None, log_file: str) -> None:
    """Become a daemon: fork, new session, cwd /, stdin from /dev/null, stdout and stderr to `log_file`.

    Keeps the current umask (python-daemon's default of 0 would make the database
    world-writable). Opens the log only inside the daemon context, as that context
    closes every inherited file. Raises InvalidInput if the log or pidfile directory
    is unusable and Conflict if the pidfile names a live process, before detaching.
    """
    import daemon
    import daemon.pidfile

    for path in filter(None, (log_file, pidfile)):
        if not os.access(os.path.dirname(path) or ".", os.W_OK):
            raise InvalidInput(f"cannot write to {os.path.dirname(path)} (for {path})")
    if pidfile:
        _clear_stale_pidfile(pidfile)
    umask = os.umask(0)
    os.umask(umask)
    context = daemon.DaemonContext(
        working_directory="/",
        umask=umask,
        pidfile=daemon.pidfile.TimeoutPIDLockFile(pidfile, acquire_timeout=0) if pidfile else None,
    )
    context.open()
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
