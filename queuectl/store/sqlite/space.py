"""SQLite's space care: a purge gives freed pages back to the filesystem and cuts the WAL back (at most so often,
and only once enough of the file is free), and `compact` does it all now. PostgreSQL needs none: its autovacuum
makes freed space reusable by itself."""

from __future__ import annotations

import os
import time

from typing import TYPE_CHECKING

from queuectl.domain.clock import Instant
from queuectl.store.base import PURGE_BATCH

if TYPE_CHECKING:
    from queuectl.store.sqlite.store import SqliteStore

#: Seconds a purge waits, on the monotonic clock, after giving freed pages back and cutting the WAL back
#: before it does so again: purges give space back at most this often.
RECLAIM_EVERY = 10.0
#: The share of the file that must be free pages before a purge gives them back.
RECLAIM_FREE = 0.25
#: Pages a purge gives back at once, at most: giving back moves pages and holds the write lock meanwhile.
RECLAIM_PAGES = 16 * PURGE_BATCH


def after_purge(store: SqliteStore, deleted: int, now: Instant) -> None:
    """After a purge that deleted `deleted` jobs, give freed pages back (`reclaim`).

    At most every RECLAIM_EVERY seconds (on `now`'s monotonic clock, else this process's)
    after a purge that deleted jobs, and only once free pages are RECLAIM_FREE of the file,
    RECLAIM_PAGES at the most; `compact` gives all of them back now. The store keeps the
    state between purges (`_purged_since_reclaim`, `_reclaim_at`).
    """
    store._purged_since_reclaim = store._purged_since_reclaim or deleted > 0
    mono = time.monotonic() if now.mono is None else now.mono
    if store._purged_since_reclaim and mono >= store._reclaim_at:
        reclaim(store, max_pages=RECLAIM_PAGES, min_free=RECLAIM_FREE)
        store._purged_since_reclaim, store._reclaim_at = False, mono + RECLAIM_EVERY


def compact(store: SqliteStore) -> str | None:
    """Give every free page back to the filesystem and cut the WAL back, now; convert a database made
    before incremental auto_vacuum (`_vacuum_to_incremental`: a one-time VACUUM, which needs free
    disk of about twice the file's size). Returns None, or one line saying what the conversion
    did or why it did not run."""
    reclaim(store)
    return _vacuum_to_incremental(store)


def reclaim(store: SqliteStore, max_pages: int | None = None, min_free: float = 0.0) -> int:
    """Give freed pages back to the filesystem and cut the WAL back; return the pages given back.

    Pages go back only once free pages are at least `min_free` of the file (a fraction):
    while jobs keep coming, the pages that retention frees are soon reused, and moving
    pages to return them would only cost writes. That needs incremental auto_vacuum
    (every database created with schema 4 or later; `_vacuum_to_incremental` converts
    older ones). The WAL is checkpointed and truncated either way; the checkpoint waits
    at most a second for readers, so it neither starves nor stalls the workers.
    """
    pages = 0
    with store._errors():
        if store.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
            free = store.conn.execute("PRAGMA freelist_count").fetchone()[0]
            if free and free >= min_free * store.conn.execute("PRAGMA page_count").fetchone()[0]:
                pages = free if max_pages is None else min(free, max_pages)
                # executescript steps the pragma to its end; execute() would free one page only.
                store.conn.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
        store.conn.execute("PRAGMA busy_timeout = 1000")
        try:
            store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            store.conn.execute(f"PRAGMA busy_timeout = {int(store.busy_timeout * 1000)}")
    return pages


def _vacuum_to_incremental(store: SqliteStore) -> str | None:
    """Convert a database made before incremental auto_vacuum with a one-time VACUUM.

    Returns None when there is nothing to do, else one line saying what was done, or
    why not: VACUUM rewrites the whole file, through the WAL, so it needs free disk of
    about twice the file's size. Blocks other writers while it runs.
    """
    with store._errors():
        if store.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
            return None
        size = os.path.getsize(store.path)
        st = os.statvfs(os.path.dirname(store.path))
        free = st.f_bavail * st.f_frsize
        if free < 2 * size:
            return (f"not compacted: converting {store.path} to incremental auto_vacuum needs about"
                    f" {2 * size / 2**20:.0f} MiB free on its filesystem, which has {free / 2**20:.0f} MiB;"
                    " freed pages are reused meanwhile")
        store.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        store.conn.execute("VACUUM")
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return f"compacted {store.path}: {size / 2**20:.1f} -> {os.path.getsize(store.path) / 2**20:.1f} MiB"
