"""Whether stderr goes to the journal: a command's error line and the worker's log then carry sd-daemon(3)
priority prefixes. A module of its own, without logging, as every command's error line asks it."""

from __future__ import annotations

import os
import sys
from typing import Mapping, TextIO


def stderr_is_journal(environ: Mapping[str, str] = os.environ, stream: TextIO | None = None) -> bool:
    """Return True if stderr is connected to the journal.

    Rule from systemd.exec(5), $JOURNAL_STREAM: it holds "DEVICE:INODE" of the journal
    stream, to compare with fstat() of stderr (a redirected stderr no longer matches).
    """
    value = environ.get("JOURNAL_STREAM", "")
    try:
        dev, ino = (int(x) for x in value.split(":"))
        st = os.fstat((stream or sys.stderr).fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)
