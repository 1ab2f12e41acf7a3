"""Which database a command or a worker uses, and opening it: the one place the api opens a store.

The commands' database is --db, else QUEUECTL_DB, else `db` in the site configuration file
(queuectl.api.conffile), else the XDG default. A worker's may differ (`Database.for_worker`).
One that cannot be used is bad input when given as an option (InvalidInput, exit 2) but a
configuration error when it came from the environment (a unit's environment file) or the
configuration file (InvalidConfig, exit 78): restarting will not fix it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Callable

from queuectl.domain.errors import DatabaseUnavailable, InvalidConfig, InvalidInput, PermissionDenied

#: Where the database named came from: what a bad one is reported as (see the module's docstring).
OPTION, ENVIRONMENT, WORKER_ENVIRONMENT, CONFIG, DEFAULT = (
    "option", "environment", "worker environment", "config", "default")

#: Seconds between tries of an unreachable PostgreSQL server at a worker's start under systemd:
#: doubling from the first to the second.
CONNECT_RETRY_MIN, CONNECT_RETRY_MAX = 1.0, 16.0


if TYPE_CHECKING:
    from queuectl.api.conffile import SiteConfig


class Database:
    """The database named (a SQLite path, a PostgreSQL URI, or None for the default), where it came from
    (OPTION, ENVIRONMENT, ...), and the store once opened; `close` closes it.

    A plain class, not a dataclass: every command builds one, and a dataclass costs its start-up.
    """

    def __init__(self, db: str | None, db_source: str = OPTION):
        self.db = db
        self.db_source = db_source
        self._site: SiteConfig | None = None
        self._store = None

    def __repr__(self) -> str:
        return f"Database({self.db!r}, {self.db_source!r})"

    def site(self) -> SiteConfig:
        """Return the site configuration file's contents (read once); raises InvalidConfig."""
        if self._site is None:
            from queuectl.api import conffile

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
        from queuectl.store.sqlite import default_db_path

        self.db_source = DEFAULT
        return default_db_path()

    @property
    def is_postgres(self) -> bool:
        """True if the database in force is a PostgreSQL URI."""
        from queuectl.domain.dburi import is_uri

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
            from queuectl.store import open_store
            from queuectl.host.wake import wake_local_workers

            path = self.db_path()
            if self.db_source == DEFAULT:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                self._store = open_store(path, defaults=self.site().defaults, session=session,
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

    def worker_store(self, wait: bool, say: Callable[[str], None], sleep: Callable[[float], None] = time.sleep):
        """Open a worker's store (a session of its own), waiting under systemd for its server.

        Under systemd (NOTIFY_SOCKET set) with `wait`, a PostgreSQL server that cannot be reached
        yet (it boots, the network comes up: DatabaseUnavailable) is waited for, with STATUS=
        saying so and `say` getting a line each time the reason changes, retrying every
        CONNECT_RETRY_MIN to CONNECT_RETRY_MAX seconds: systemd's TimeoutStartSec bounds the wait,
        and restarting at once would soon hit the unit's start limit. Elsewhere, with `wait` False
        (a burst worker: a batch that cannot reach its database fails rather than hangs), and on
        any other error, raises as `store` does.
        """
        from queuectl.host.notify import Notifier

        notifier, pause, said = Notifier(), CONNECT_RETRY_MIN, None
        while True:
            try:
                return self.store(session=True)
            except DatabaseUnavailable as e:
                if not (wait and notifier.enabled and self.is_postgres):
                    raise
                if str(e) != said:
                    say(f"{e}; waiting for it")
                    said = str(e)
                notifier.status(f"waiting for the database: {e}")
                sleep(pause)
                pause = min(pause * 2, CONNECT_RETRY_MAX)

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
