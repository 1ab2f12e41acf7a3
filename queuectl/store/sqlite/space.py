"""SQLite's space care: a purge gives freed pages back to the filesystem and cuts the WAL back (at most so often,
and only once enough of the file is free), and `compact` does it all now. PostgreSQL needs none: its autovacuum
makes freed space reusable by itself."""

from __future__ import annotations

import os
import time
from typing import Any

from queuectl.domain.clock import Instant, instant
from queuectl.store.base import PURGE_BATCH
from queuectl.store.sql import SqlStore

#: Seconds a purge waits, on the monotonic clock, after giving freed pages back and cutting the WAL back
#: before it does so again: purges give space back at most this often.
RECLAIM_EVERY = 10.0
#: The share of the file that must be free pages before a purge gives them back.
RECLAIM_FREE = 0.25
#: Pages a purge gives back at once, at most: giving back moves pages and holds the write lock meanwhile.
RECLAIM_PAGES = 16 * PURGE_BATCH


class SpaceCare(SqlStore):
    """SqlStore with SQLite's space care (see the module): for SqliteStore, which sets `conn`, `path`,
    `busy_timeout`, `_purged_since_reclaim` and `_reclaim_at`."""

    conn: Any
    path: str
    busy_timeout: float

    def purge(self, older_than: dict[str, float], now: Instant | float, queue: str | None = None,
              limit: int = PURGE_BATCH) -> int:
        """Delete finished jobs as SqlStore.purge does; return how many. Then give freed pages back.

        At most every RECLAIM_EVERY seconds (on `now`'s monotonic clock, else this process's)
        after a purge that deleted jobs, and only once free pages are RECLAIM_FREE of the file,
        RECLAIM_PAGES at the most (`_reclaim_space`); `compact` gives all of them back now.
        """
        now = instant(now)
        deleted = super().purge(older_than, now, queue, limit)
        self._purged_since_reclaim = self._purged_since_reclaim or deleted > 0
        mono = time.monotonic() if now.mono is None else now.mono
        if self._purged_since_reclaim and mono >= self._reclaim_at:
            self._reclaim_space(max_pages=RECLAIM_PAGES, min_free=RECLAIM_FREE)
            self._purged_since_reclaim, self._reclaim_at = False, mono + RECLAIM_EVERY
        return deleted

    def compact(self) -> str | None:
        """Give every free page back to the filesystem and cut the WAL back, now; convert a database made
        before incremental auto_vacuum (`_vacuum_to_incremental`: a one-time VACUUM, which needs free
        disk of about twice the file's size). Returns None, or one line saying what the conversion
        did or why it did not run."""
        self._reclaim_space()
        return self._vacuum_to_incremental()

    def _reclaim_space(self, max_pages: int | None = None, min_free: float = 0.0) -> int:
        """Give freed pages back to the filesystem and cut the WAL back; return the pages given back.

        Pages go back only once free pages are at least `min_free` of the file (a fraction):
        while jobs keep coming, the pages that retention frees are soon reused, and moving
        pages to return them would only cost writes. That needs incremental auto_vacuum
        (every database created with schema 4 or later; `_vacuum_to_incremental` converts
        older ones). The WAL is checkpointed and truncated either way; the checkpoint waits
        at most a second for readers, so it neither starves nor stalls the workers.
        """
        pages = 0
        with self._errors():
            if self.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
                if free and free >= min_free * self.conn.execute("PRAGMA page_count").fetchone()[0]:
                    pages = free if max_pages is None else min(free, max_pages)
                    # executescript steps the pragma to its end; execute() would free one page only.
                    self.conn.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
            self.conn.execute("PRAGMA busy_timeout = 1000")
            try:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return pages

    def _vacuum_to_incremental(self) -> str | None:
        """Convert a database made before incremental auto_vacuum with a one-time VACUUM.

        Returns None when there is nothing to do, else one line saying what was done, or
        why not: VACUUM rewrites the whole file, through the WAL, so it needs free disk of
        about twice the file's size. Blocks other writers while it runs.
        """
        with self._errors():
            if self.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
                return None
            size = os.path.getsize(self.path)
            st = os.statvfs(os.path.dirname(self.path))
            free = st.f_bavail * st.f_frsize
            if free < 2 * size:
                return (f"not compacted: converting {self.path} to incremental auto_vacuum needs about"
                        f" {2 * size / 2**20:.0f} MiB free on its filesystem, which has {free / 2**20:.0f} MiB;"
                        " freed pages are reused meanwhile")
            self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return f"compacted {self.path}: {size / 2**20:.1f} -> {os.path.getsize(self.path) / 2**20:.1f} MiB"
