"""The two engines a queue lives on, and the marks that choose them for a test's `db` (tests/conftest.py).

    pytestmark = BOTH_ENGINES      every test of the module runs on SQLite, then on PostgreSQL
    @SQLITE_ONLY                   in such a module, a test of what only SQLite has (its file, its pragmas)
    @POSTGRESQL_ONLY               ... or only PostgreSQL (its server)
"""

import pytest

ENGINES = ("sqlite", "postgresql")
BOTH_ENGINES = pytest.mark.both_engines
SQLITE_ONLY = pytest.mark.parametrize("db", ["sqlite"], indirect=True)
POSTGRESQL_ONLY = pytest.mark.parametrize("db", ["postgresql"], indirect=True)
