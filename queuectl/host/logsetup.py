"""Worker logging: plain timestamped lines in a terminal, sd-daemon(3) priority prefixes under systemd."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from queuectl.host.journal import stderr_is_journal

#: syslog priorities by logging level (sd-daemon(3): "<3>" error, "<4>" warning, "<6>" info, "<7>" debug).
PRIORITIES = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


class PriorityFormatter(logging.Formatter):
    """Prefix each line with its syslog priority, so `journalctl -p` can filter; journald adds the time."""

    def format(self, record: logging.LogRecord) -> str:
        prio = PRIORITIES.get(record.levelno, 6)
        return "\n".join(f"<{prio}>{line}" for line in super().format(record).splitlines() or [""])


def configure(stream: TextIO | None = None, journal: bool | None = None, verbose: bool = False) -> None:
    """Send the worker's log records (INFO and up; DEBUG too if `verbose`) to `stream` (default stderr)."""
    stream = stream or sys.stderr
    # A worker logs twice per job: skip what the records would gather and the format never
    # shows (the caller's frame, thread and process), as the logging HOWTO's "Optimization" advises.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    if journal is None:
        journal = stderr_is_journal(stream=stream)
    handler = logging.StreamHandler(stream)
    if journal:
        handler.setFormatter(PriorityFormatter("%(message)s"))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s queuectl-worker[{os.getpid()}] %(levelname)s %(message)s"))
    root = logging.getLogger("queuectl")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
