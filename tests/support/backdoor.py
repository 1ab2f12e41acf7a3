"""Arrange a state behind queuectl's back: the one place where a test writes the database's tables itself.

Some states cannot be made through the store's interface (queuectl.store.interface), because no version of
queuectl that runs today makes them: a heartbeat written by a worker of an older queuectl (which did not count
its beats), a setting corrupted by hand, rows of an older schema, a database that lost a recorded end in a
failover, a schema newer than this queuectl's. Tests that need one arrange it here, and only here; every
assertion goes through the interface. Tests about one engine's own storage (tests/unit/test_store_sqlite.py,
tests/unit/test_postgres.py) use that engine's connection instead.
"""

from __future__ import annotations

from queuectl.store import open_store


def behind_queuectls_back(db: str, sql: str, params=()) -> int:
    """Run one statement (`?` placeholders, either engine) on the database at `db` in a transaction of its own;
    return its rowcount. For arrangements only, never to read what a test asserts."""
    with open_store(db) as s:
        with s._write() as c:
            return c.execute(sql, params).rowcount
