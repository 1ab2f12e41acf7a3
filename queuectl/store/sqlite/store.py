"""The SQLite store: the connection, transactions, migrations and file care that only SQLite needs.

The queue's queries live in queuectl.store.sql and its concerns, shared with PostgreSQL; the schema in
queuectl.store.sqlite.schema, the file's space care in queuectl.store.sqlite.space. Every write is
one BEGIN IMMEDIATE transaction, so writers never interleave and claims need no row
locks; WAL lets readers go on meanwhile.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from queuectl.domain import settings as settings_mod
from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable, InvalidInput, PermissionDenied
from queuectl.store.sqlite.schema import APPLICATION_ID, MIGRATIONS, REBUILDS, SCHEMA_VERSION
from queuectl.store.fragments import CLAIM_ORDER, CLAIM_SET
from queuectl.store import exchange, operator, workers
from queuectl.store.base import PURGE_BATCH
from queuectl.store.core import JOB_COLUMNS, update_each
from queuectl.store.sqlite import space
from queuectl.store.sql import SqlStore
from queuectl.store.timing import placeholders

#: Seconds a connection waits for another writer's lock before reporting "database is locked".
BUSY_TIMEOUT = 30.0
#: Bytes the WAL file is truncated to after a checkpoint (PRAGMA journal_size_limit).
WAL_SIZE_LIMIT = 64 * 1024 * 1024
#: The claim's SET list with `?` placeholders (parameters: worker id, now).
_CLAIM_SET = placeholders(CLAIM_SET)[0]


class SqliteStore(SqlStore):
    """A queuectl database in one SQLite file.

    `defaults` replaces built-in setting defaults (from the site configuration file).
    Every commit is synchronous=FULL (the WAL fsynced at each commit), the workers' exchanges
    included: a returned enqueue and a recorded end survive a power loss, which then repeats
    no more than a worker's crash would (docs/semantics.md, Durability; tests/guests' power-cut).
    `read_only`: open an existing file only to read it (SQLite's mode=ro; a write raises). Raises
    InvalidInput when the path cannot hold a database or holds another program's file, DatabaseError when the database cannot be used. `after_commit(store)` is called after a
    commit that may have made jobs ready or requested cancels (see open_store).
    """

    def __init__(self, path: str, *, busy_timeout: float = BUSY_TIMEOUT,
                 defaults: dict[str, Any] | None = None, after_commit: Callable[[Any], None] | None = None,
                 read_only: bool = False):
        self.path = os.path.abspath(path)
        self.read_only = read_only
        self.after_commit = after_commit
        self.busy_timeout = busy_timeout
        self.defaults = {**settings_mod.defaults(), **(defaults or {})}
        self.c: sqlite3.Connection
        self._wake_pending = False  # set by _notify inside a write transaction (see _write)
        self._purged_since_reclaim = False  # a purge deleted jobs since freed pages were last given back
        self._reclaim_at = 0.0  # monotonic time from which a purge may give freed pages back
        if read_only:  # a viewer that may read the file and not write it (queuectl top): SQLite's mode=ro
            _check_readable(self.path)
            from urllib.parse import quote

            target = f"file:{quote(self.path)}?mode=ro"
        else:
            _check_path(self.path)
            _create_file(self.path)
            target = self.path
        try:
            # One thread at a time uses a store, not always the same one: the dashboard's request threads
            # take turns on its connections under a lock (queuectl.web.reads).
            self.conn = sqlite3.connect(target, timeout=busy_timeout, isolation_level=None, uri=read_only,
                                        check_same_thread=False)
        except sqlite3.Error as e:
            raise InvalidInput(f"cannot open database {self.path}: {e}") from None
        self.conn.row_factory = sqlite3.Row
        self.c = self.conn
        with self._errors():
            self.conn.execute("PRAGMA synchronous = FULL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            # After a checkpoint the WAL file is cut back to this size, so it stays bounded.
            self.conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            self._migrate()

    # -- connection -------------------------------------------------------------------------

    UniqueViolation = sqlite3.IntegrityError
    # Without ANALYZE statistics SQLite's planner prefers jobs_state and sorts every ready job on
    # each claim; the partial indexes' WHERE is repeated in the queries (https://www.sqlite.org/partialindex.html).
    READY_INDEX = "INDEXED BY jobs_ready"
    # `||` makes text of two blobs; the cast takes its bytes back as a blob.
    CONCAT = "CAST(({0} || {1}) AS BLOB)"
    FINISHED_INDEX = "INDEXED BY jobs_finished"
    NOT_INDEXED = "+{0}"
    READY_QUEUE_INDEX = "INDEXED BY jobs_ready_queue"

    # -- the operations that are SQLite's own --------------------------------------------------

    exchange = exchange.exchange
    heartbeat = workers.heartbeat

    def purge(self, older_than: dict[str, float], now: Instant | float, queue: str | None = None,
              limit: int = PURGE_BATCH) -> int:
        """Delete finished jobs (queuectl.store.operator.purge); return how many. Then give freed pages back, at
        most so often (queuectl.store.sqlite.space.after_purge)."""
        now = instant(now)
        deleted = operator.purge(self, older_than, now, queue, limit)
        space.after_purge(self, deleted, now)
        return deleted

    def compact(self) -> str | None:
        """Give every free page back and cut the WAL back now (queuectl.store.sqlite.space.compact)."""
        return space.compact(self)

    def clock(self) -> float:
        """This host's wall clock, in Unix seconds."""
        return time.time()

    def wakeup_source(self) -> None:
        """None: a SQLite worker is woken by queuectl.host.wake, on this host."""
        return None

    def maintain(self, worker_id: int) -> None:
        """Nothing: SQLite's counters are kept in each transaction."""

    # -- connection -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def describe(self) -> str:
        """The database file's absolute path."""
        return self.path

    def can_write(self) -> str | None:
        """Return None if this user may write the database, else why not (the file or its directory is not
        writable: SQLite writes its -wal and -shm files beside it)."""
        if self.read_only:
            return f"{self.path} is not writable"
        directory = os.path.dirname(self.path)
        if not os.access(directory, os.W_OK | os.X_OK):
            return f"directory {directory} is not writable"
        return None if os.access(self.path, os.W_OK) else f"{self.path} is not writable"

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn sqlite3 errors into one-line queuectl errors."""
        try:
            yield
        except sqlite3.IntegrityError:
            raise  # callers turn constraint failures into domain errors
        except UnicodeEncodeError as e:  # a parameter with lone surrogates (e.g. non-UTF-8 argv bytes)
            raise InvalidInput(f"not valid UTF-8 text: {e.object!r}") from None
        except sqlite3.DatabaseError as e:
            text = str(e)
            if "file is not a database" in text:
                raise InvalidInput(f"{self.path} is not a queuectl database ({text})") from None
            if "disk is full" in text:
                raise DatabaseUnavailable(f"database {self.path}: {text} (free space on its filesystem)") from None
            if "readonly" in text or "unable to open" in text:
                why = "opened read-only here" if self.read_only else "check its permissions"
                raise PermissionDenied(f"cannot write to database {self.path}: {text} ({why})") from None
            if "database is locked" in text:  # another process held its lock for the whole busy timeout
                raise DatabaseUnavailable(f"database {self.path}: {text}") from None
            raise DatabaseError(f"database {self.path}: {text}") from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one BEGIN IMMEDIATE transaction; roll back on any exception.

        Once it committed, `after_commit` is called if the block called `_notify`.
        """
        with self._errors():
            self.conn.execute("BEGIN IMMEDIATE")
            self._wake_pending = False
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # SQLite may have rolled back by itself already
                    self.conn.execute("ROLLBACK")
                raise
        if self._wake_pending:
            self._wake_pending = False
            if self.after_commit is not None:
                self.after_commit(self)

    def _notify(self, c) -> None:
        """Mark a wake-up for the workers, handed to `after_commit` by `_write` once the transaction committed."""
        self._wake_pending = True

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        if version == SCHEMA_VERSION and app_id == APPLICATION_ID:
            return  # the common path: two reads, no lock
        has_tables = self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if app_id != APPLICATION_ID and (version != 0 or has_tables):
            raise InvalidInput(f"{self.path} is not a queuectl database (it is another program's SQLite file)")
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path} has schema version {version}, newer than this queuectl's {SCHEMA_VERSION}; upgrade queuectl"
            )
        if version == 0 and not has_tables:
            # Freed pages can then go back to the filesystem (incremental_vacuum after deletes);
            # it must be set before the first table exists.
            self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self._enter_wal()
        rebuild = any(step in REBUILDS for step in range(version + 1, SCHEMA_VERSION + 1))
        if rebuild:  # a no-op inside a transaction; dropping the old table must not cascade
            self.conn.execute("PRAGMA foreign_keys = OFF")
        try:
            with self._write() as c:
                version = c.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _statements(MIGRATIONS[step]):
                        c.execute(statement)
                    c.execute(f"PRAGMA user_version = {step}")
                if rebuild and c.execute("PRAGMA foreign_key_check").fetchone() is not None:
                    raise DatabaseError(f"{self.path}: migration left dangling job output; rolled back")
                c.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        finally:
            if rebuild:
                self.conn.execute("PRAGMA foreign_keys = ON")

    def _enter_wal(self) -> None:
        """Switch the file to WAL mode (persistent), waiting up to busy_timeout for other openers.

        The switch needs an exclusive lock and SQLite does not run the busy handler for it:
        two processes that open a new database at once (two units started together) would
        otherwise see "database is locked" at once. Must run outside a transaction.
        """
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _update_returning(self, c, sql: str, rows: list[tuple]) -> list:
        return update_each(c, sql, rows)

    def _claim_rows(self, c, worker_id: int, where: str, params: list, limit: int, now: Instant) -> list:
        # One UPDATE ... RETURNING: inside BEGIN IMMEDIATE no other writer can claim meanwhile.
        return c.execute(
            f"UPDATE jobs SET {_CLAIM_SET} WHERE seq IN (SELECT seq FROM jobs {self.READY_INDEX} WHERE {where}"
            f" ORDER BY {CLAIM_ORDER} LIMIT ?) RETURNING {JOB_COLUMNS}",
            (worker_id, now.wall, *params, limit),
        ).fetchall()


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (triggers hold inner semicolons)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return [s for s in out if s]


def _check_path(path: str) -> None:
    """Raise InvalidInput unless `path` can hold a database this user can write."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise InvalidInput(f"database directory {directory} does not exist")
    if os.path.isdir(path):
        raise InvalidInput(f"database path {path} is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        raise InvalidInput(f"database path {path} is not a regular file")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionDenied(f"permission denied: cannot use database directory {directory}{_group_hint(directory)}")
    if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
        raise PermissionDenied(f"permission denied: cannot read and write database {path}{_group_hint(path)}")


def _check_readable(path: str) -> None:
    """Raise InvalidInput unless `path` is a file, or PermissionDenied unless this user may read it."""
    if not os.path.isfile(path):
        raise InvalidInput(f"database {path} does not exist or is not a regular file")
    if not os.access(path, os.R_OK):
        raise PermissionDenied(f"permission denied: cannot read database {path}{_group_hint(path)}")
    directory = os.path.dirname(path)
    if not os.path.exists(path + "-shm") and not os.access(directory, os.W_OK | os.X_OK):
        # WAL mode: a reader needs the shared-memory file, which only a writer of the directory can create.
        raise PermissionDenied(f"permission denied: cannot read database {path} while nothing that may write it"
                               f" has it open (SQLite would create {path}-shm, and {directory} is not writable)")


def _group_hint(path: str) -> str:
    """Say which group may use `path` when it is group-writable (as /var/lib/queuectl is)."""
    try:
        st = os.stat(path)
        if not st.st_mode & 0o020:
            return ""
        import grp  # here: only a message needs it

        return f" (members of group {grp.getgrgid(st.st_gid).gr_name} may use it)"
    except (OSError, KeyError):
        return ""


def _create_file(path: str) -> None:
    """Create an empty database file with mode 0666 less the umask, if there is none.

    SQLite itself creates new databases 0644 whatever the umask, and gives the -wal and
    -shm files the database's mode; creating the file first lets a group share it
    (a service with UMask=0007 makes it 0660).
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        pass
    except OSError as e:
        raise InvalidInput(f"cannot create database {path}: {e.strerror}") from None


def default_db_path() -> str:
    """Return $XDG_DATA_HOME/queuectl/queuectl.db (XDG_DATA_HOME defaults to ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "queuectl", "queuectl.db")


__all__ = ["SqliteStore", "default_db_path", "BUSY_TIMEOUT", "WAL_SIZE_LIMIT"]
