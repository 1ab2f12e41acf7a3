"""Which database a command or a worker uses, and opening it: the one place the api opens a store (a worker's,
waited for at its start: queuectl.api.starting).

The commands' database is --db, else QUEUECTL_DB, else `db` in the site configuration file
(queuectl.api.conffile), else the XDG default. A worker's may differ (`Database.for_worker`).
One that cannot be used is bad input when given as an option (InvalidInput, exit 2) but a
configuration error when it came from the environment (a unit's environment file) or the
configuration file (InvalidConfig, exit 78): restarting will not fix it.
"""

from __future__ import annotations

import os

from queuectl.api import conffile
from queuectl.domain.dburi import is_uri
from queuectl.domain.errors import InvalidConfig, InvalidInput, PermissionDenied
from queuectl.host.wake import wake_local_workers

#: Where the database named came from: what a bad one is reported as (see the module's docstring).
OPTION, ENVIRONMENT, WORKER_ENVIRONMENT, CONFIG, DEFAULT = (
    "option", "environment", "worker environment", "config", "default")


class Database:
    """The database named (a SQLite path, a PostgreSQL URI, or None for the default), where it came from
    (OPTION, ENVIRONMENT, ...), and the store once opened; `close` closes it.

    A plain class, not a dataclass: every command builds one, and a dataclass costs its start-up.
    """

    def __init__(self, db: str | None, db_source: str = OPTION):
        self.db = db
        self.db_source = db_source
        self._site: conffile.SiteConfig | None = None
        self._store = None

    def __repr__(self) -> str:
        return f"Database({self.db!r}, {self.db_source!r})"

    def site(self) -> conffile.SiteConfig:
        """Return the site configuration file's contents (read once); raises InvalidConfig."""
        if self._site is None:
            self._site = conffile.load()
        return self._site

    def db_path(self) -> str:
        """Return the database in force, a SQLite path or a PostgreSQL URI, by the order of the module's docstring."""
        if self.db:
            return self.db
        site = self.site()
        if site.db:
            self.db_source = CONFIG
            return site.db
        self.db_source = DEFAULT
        return _stores().default_db_path()

    @property
    def is_postgres(self) -> bool:
        """True if the database in force is a PostgreSQL URI."""
        return is_uri(self.db_path())

    def for_worker(self) -> None:
        """Make the database in force the one a worker uses, which may differ from the commands' one.

        Commands may reach PostgreSQL through a pooler in transaction mode (PgBouncer); a
        worker keeps session state (LISTEN, prepared statements) and needs a connection of its
        own. Order: --db on the command line, else QUEUECTL_WORKER_DB, else QUEUECTL_DB, else
        `worker-db` in the configuration file, else its `db`, else the XDG default: the
        environment before the file, and at each level the workers' own value first.
        An empty QUEUECTL_WORKER_DB counts as unset, as an empty QUEUECTL_DB does (Click's rule).
        """
        if self.db_source == OPTION and self.db:
            return
        env = os.environ.get("QUEUECTL_WORKER_DB")
        if env:
            self.db, self.db_source = env, WORKER_ENVIRONMENT
        elif not self.db and self.site().worker_db:
            self.db, self.db_source = self.site().worker_db, CONFIG

    def store(self, session: bool = False, read_only: bool = False):
        """Open the database (creating it, and the default directory, on first use) and return its store.

        `session` and `read_only`: see queuectl.store.open_store. Raises InvalidInput, or InvalidConfig
        for a database named by the environment or the configuration file; PermissionDenied and
        DatabaseError (DatabaseUnavailable among them) as the store raises them.
        """
        if self._store is None:
            path = self.db_path()
            if self.db_source == DEFAULT:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                self._store = _stores().open_store(path, defaults=self.site().defaults, session=session,
                                         after_commit=wake_local_workers, read_only=read_only)
            except PermissionDenied:
                raise
            except InvalidInput as e:
                if self.db_source in (ENVIRONMENT, WORKER_ENVIRONMENT):
                    var = "QUEUECTL_WORKER_DB" if self.db_source == WORKER_ENVIRONMENT else "QUEUECTL_DB"
                    raise InvalidConfig(f"{e} (from {var})") from None
                if self.db_source == CONFIG:
                    raise InvalidConfig(f"{e} (from {self.site().path})") from None
                raise
        return self._store

    def log_dir(self) -> str:
        """Return where a detached worker logs by default: beside a SQLite database, else $XDG_STATE_HOME/queuectl."""
        if not self.is_postgres:
            return os.path.dirname(self.db_path())
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        os.makedirs(os.path.join(base, "queuectl"), exist_ok=True)
        return os.path.join(base, "queuectl")

    def close(self) -> None:
        """Close the store if it is open."""
        if self._store is not None:
            self._store.close()
            self._store = None


def _stores():
    """queuectl.store, imported when a command opens its database (or names the default one, which the SQLite
    store places).

    seam: the database's driver. `queuectl --help`, --version and a command's --help open no database, and
    load no store (tests/unit/test_startup.py); PostgreSQL's driver loads one step further, with a
    postgresql:// database only (queuectl.store.open_store).
    """
    from queuectl import store  # seam: the database's driver

    return store


def open_database(db: str | None = None):
    """Open the queue's store for a library caller: `db` (a SQLite path or a PostgreSQL URI), else the
    commands' resolution order without the --db option (QUEUECTL_DB, the configuration file, the
    XDG default). Raises as Database.store does; the caller closes the store."""
    if db is None and os.environ.get("QUEUECTL_DB"):
        return Database(os.environ["QUEUECTL_DB"], ENVIRONMENT).store()
    return Database(db, OPTION).store()


def can_write(store) -> str | None:
    """Return None if this user may change jobs and queues in `store`, else why not, in words (a SQLite file or
    directory that is not writable, a PostgreSQL role without UPDATE); raises what the store's reads raise."""
    return store.can_write()
