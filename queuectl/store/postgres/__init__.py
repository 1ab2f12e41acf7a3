"""The PostgreSQL engine: the connection and LISTEN (store), the one-statement exchange (exchange), the schema
(schema). psycopg is imported here only: SQLite users need not install it."""

from queuectl.store.postgres.store import CHANNEL, PostgresStore

__all__ = ["PostgresStore", "CHANNEL"]
