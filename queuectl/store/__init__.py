"""The queue's storage: the shared records and rules (base), the shared SQL (sql), and two engines.

`open_store(target)` opens SQLite for a path and PostgreSQL for a postgresql:// URI.
Callers import from here (`from queuectl.store import open_store, WorkerGone`); the interface by caller
from queuectl.store.interface, a worker's records from queuectl.store.request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from queuectl.domain.dburi import is_uri, near_miss
from queuectl.domain.errors import InvalidInput
from queuectl.store.base import (PURGE_BATCH, CancelResult, DuplicateJob, Enqueued, Exchanged, FollowedOutput, JobProcess,
                                 UnknownDependency, WorkerGone)
from queuectl.store.sql import SqlStore
from queuectl.store.sqlite import BUSY_TIMEOUT, WAL_SIZE_LIMIT, SqliteStore, default_db_path

if TYPE_CHECKING:  # the interface (queuectl.store.interface) and a worker's records (request) load where used
    from queuectl.store.interface import Store


def open_store(target: str, *, defaults: dict[str, Any] | None = None,
               session: bool = False, after_commit: Callable[[Store], None] | None = None,
               read_only: bool = False) -> Store:
    """Open the queue at `target`: a PostgreSQL URI (postgresql://, postgres://) or a SQLite file path.

    `session`: the caller is a worker, which keeps session state on PostgreSQL (LISTEN, prepared
    statements) and so needs a connection of its own, not one through a pooler in transaction
    mode; False (commands) keeps no state beyond a transaction. SQLite ignores it.

    `after_commit(store)`: called after each commit that may have made jobs ready or requested cancels,
    so that the caller wakes the workers (queuectl.host.wake.wake_local_workers); the store itself knows no
    processes. SQLite only: PostgreSQL NOTIFYs its workers inside the transaction, and ignores it.

    `read_only`: a viewer's connection (`queuectl top`, the dashboard's reads), on which every write raises
    PermissionDenied (PostgreSQL runs each statement in a READ ONLY transaction; SQLite opens an existing
    file mode=ro: also one this user may read and not write).

    Raises InvalidInput for a value meant for PostgreSQL that is not such a URI (a mistyped
    scheme, libpq's keyword form), and what the engine's constructor raises (InvalidInput,
    InvalidConfig, DatabaseError).
    """
    if is_uri(target):
        from queuectl.store.postgres import PostgresStore  # seam: PostgreSQL's driver (psycopg)

        return PostgresStore(target, defaults=defaults, session=session, read_only=read_only)
    why = near_miss(target)
    if why is not None:
        raise InvalidInput(why)
    return SqliteStore(target, defaults=defaults, after_commit=after_commit, read_only=read_only)


__all__ = ["open_store", "is_uri", "SqlStore", "SqliteStore", "Exchanged", "FollowedOutput", "JobProcess", "CancelResult", "DuplicateJob", "UnknownDependency", "Enqueued",
           "WorkerGone", "PURGE_BATCH", "BUSY_TIMEOUT", "WAL_SIZE_LIMIT", "default_db_path"]
