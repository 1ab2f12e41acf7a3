"""Tell systemd about the worker (sd_notify(3)): READY, STATUS, STOPPING and WATCHDOG pings.

A thin layer over the sdnotify package. Off systemd (no NOTIFY_SOCKET) every call is a no-op,
so the worker calls it unconditionally.
"""

from __future__ import annotations

import os
from typing import Mapping


def watchdog_interval(environ: Mapping[str, str] = os.environ, pid: int | None = None) -> float | None:
    """Return the seconds between watchdog pings (WATCHDOG_USEC / 2), or None if no watchdog is asked for.

    Rule from sd_watchdog_enabled(3): the watchdog applies when WATCHDOG_USEC is a positive
    integer and WATCHDOG_PID is unset or names this process. Half the timeout leaves room
    for one late ping, as that page advises.
    """
    try:
        usec = int(environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    target = environ.get("WATCHDOG_PID")
    if usec <= 0 or (target and target != str(pid if pid is not None else os.getpid())):
        return None
    return usec / 2 / 1e6


class Notifier:
    """Send sd_notify messages when NOTIFY_SOCKET is set; do nothing otherwise.

    `watchdog_interval` is seconds between pings, or None when systemd expects none.
    """

    def __init__(self, environ: Mapping[str, str] = os.environ):
        self.enabled = bool(environ.get("NOTIFY_SOCKET"))
        self.watchdog_interval = watchdog_interval(environ) if self.enabled else None
        self._status: str | None = None
        self._sd = None
        if self.enabled:
            import sdnotify  # only under systemd: keeps it off the CLI's start-up path

            self._sd = sdnotify.SystemdNotifier()

    def _send(self, message: str) -> None:
        if self._sd is not None:
            self._sd.notify(message)

    def ready(self, status: str) -> None:
        """Say the worker is ready (the database is open and the worker registered)."""
        self._status = status
        self._send(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        """Update the status line shown by `systemctl status`, when it changed."""
        if status != self._status:
            self._status = status
            self._send(f"STATUS={status}")

    def stopping(self, status: str) -> None:
        """Say a stop has begun (the worker drains)."""
        self._status = status
        self._send(f"STOPPING=1\nSTATUS={status}")

    def watchdog(self) -> None:
        """Ping the watchdog: call only from a live loop (queuectl.worker's watchdog rule)."""
        if self.watchdog_interval is not None:
            self._send("WATCHDOG=1")
