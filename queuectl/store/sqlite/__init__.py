"""The SQLite engine: the connection, transactions and migrations (store), the schema (schema), space care (space)."""

from queuectl.store.sqlite.store import BUSY_TIMEOUT, WAL_SIZE_LIMIT, SqliteStore, default_db_path

__all__ = ["SqliteStore", "default_db_path", "BUSY_TIMEOUT", "WAL_SIZE_LIMIT"]
