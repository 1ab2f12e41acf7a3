"""The two engines a queue lives on, and the marks that choose them for a test's `db` (tests/conftest.py).

    pytestmark = BOTH_ENGINES      every test of the module runs on SQLite, then on PostgreSQL
    @SQLITE_ONLY                   in such a module, a test of what only SQLite has (its file, its pragmas)
    @POSTGRESQL_ONLY               ... or only PostgreSQL (its server)
    pytestmark = ON_POSTGRESQL     every test of the module has a PostgreSQL queue alone (no ids added)

Without a mark, `db` is a SQLite file's path.
"""

import sqlite3

import pytest

from queuectl.store import is_uri

ENGINES = ("sqlite", "postgresql")
BOTH_ENGINES = pytest.mark.both_engines
SQLITE_ONLY = pytest.mark.parametrize("db", ["sqlite"], indirect=True)
POSTGRESQL_ONLY = pytest.mark.parametrize("db", ["postgresql"], indirect=True)
ON_POSTGRESQL = pytest.mark.on_postgresql


def sqlite_path(tmp_path) -> str:
    return str(tmp_path / "queue.db")


def engine_of(request) -> str:
    """The engine of the test's `db` (`request` is the fixture's): its parameter (BOTH_ENGINES, SQLITE_ONLY,
    POSTGRESQL_ONLY), else PostgreSQL under ON_POSTGRESQL, else SQLite."""
    param = getattr(request, "param", None)
    if param is not None:
        return param
    return "postgresql" if request.node.get_closest_marker("on_postgresql") else "sqlite"


def engine_db(request, tmp_path, engine: str) -> str:
    """A fresh database on `engine`: a SQLite file path, or a PostgreSQL URI (pg_uri)."""
    return sqlite_path(tmp_path) if engine == "sqlite" else request.getfixturevalue("pg_uri")


def snapshot(path) -> tuple:
    """Everything in the database: schema, rows of every table, and (SQLite) the header pragmas."""
    if is_uri(path):
        import psycopg

        with psycopg.connect(path) as con:
            tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables"
                                                " WHERE table_schema = 'queuectl' ORDER BY 1")]
            return tuple((t, tuple(con.execute(f"SELECT * FROM queuectl.{t} ORDER BY 1"))) for t in tables)
    con = sqlite3.connect(path)
    try:
        pragmas = tuple(con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("user_version", "application_id"))
        return pragmas, tuple(con.iterdump())
    finally:
        con.close()
