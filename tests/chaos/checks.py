"""What the chaos tier's tests check after the harm they do: a database's integrity, a process's CPU time,
and whether this machine grants a privilege a case needs (require_privilege)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from typing import Sequence

import pytest

from support.suite import require
from queuectl.store import is_uri, open_store


def require_privilege(what: str, command: Sequence[str]) -> None:
    """Run `command`, which exercises a privilege (a mount, a namespace): the case's own action or a
    probe of it. Without root: skip, or fail under CI (CI runs as root). As root, a refusal skips
    the case with `what` and the refusal, CI or not: the machine lacks the privilege (a container's
    manager withholds it: systemd-nspawn refuses a bind mount over /proc), not the setup.
    """
    require(None if os.geteuid() == 0 else f"{what} needs root", "chaos")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        refusal = (proc.stderr.strip() or f"exit {proc.returncode}").replace("\n", " ")
        pytest.skip(f"this machine refuses {what} (in a container?): {refusal}")


def integrity(db: str) -> str:
    """"ok" when the database is sound, else what is wrong.

    SQLite: `PRAGMA integrity_check` of the file. PostgreSQL: the job counts that triggers keep
    (what `status` and `metrics` read) agree with a count of the rows themselves.
    """
    if is_uri(db):
        import psycopg

        with open_store(db) as s:
            kept = s.counts()
        with psycopg.connect(db) as con:  # the rows themselves, on the engine's own connection
            rows = con.execute("SELECT queue, state, count(*) FROM queuectl.jobs GROUP BY queue, state").fetchall()
        counted: dict[str, dict[str, int]] = {}
        for queue, state, n in rows:
            counted.setdefault(queue, {})[state] = n
        return "ok" if kept == counted else f"kept counts {kept} differ from the rows' {counted}"
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` so far, in seconds (proc(5): stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
