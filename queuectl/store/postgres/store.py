"""The PostgreSQL store: workers on many hosts share one queue through one server.

What differs from SQLite (the queries themselves are shared: queuectl.store.sql and its concerns):
- Claims: one statement, a CTE that picks `ORDER BY priority DESC, run_at, seq LIMIT n
  FOR UPDATE SKIP LOCKED` and an UPDATE ... RETURNING of what it picked. The CTE is what
  keeps the planner from claiming more than n; SKIP LOCKED lets claims run side by side.
  No transaction stays open while a job runs.
- Wake-ups: `NOTIFY queuectl` once per transaction that makes jobs ready (enqueue, retry,
  resume) or requests a cancel; workers LISTEN on a connection of their own, and poll as
  the fallback.
- Time: the wall-clock times the store writes and compares (heartbeats, due times,
  leases) are on the server's clock, read at connect and at each heartbeat and carried
  between readings by this host's CLOCK_BOOTTIME (which neither steps nor stops in a
  suspend), so host clocks may disagree.
- Connections: a lost connection is opened again on the next call, at most once per
  back-off period (RECONNECT_MIN doubling up to RECONNECT_MAX seconds); meanwhile calls
  fail with the last connection error (the same text, so that the worker logs it once),
  which the worker rides out with its jobs and results in memory.
- Counters are deltas folded by one worker at a time (see postgres_schema), and
  maintenance takes advisory locks so that it runs once, not in every worker.
A password in the URI never appears in any message or output (describe, errors).

psycopg 3 is imported here only: SQLite users need not install it.
"""

from __future__ import annotations

import functools
import re
import select
import time
import uuid
from contextlib import contextmanager
from itertools import zip_longest
from typing import Any, Iterator

from queuectl.domain import settings as settings_mod
from queuectl.domain.clock import Instant
from queuectl.domain.dburi import redact, uri_error
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable, InvalidConfig, InvalidInput, PermissionDenied
from queuectl.store import activity, operator, workers
from queuectl.store.postgres import exchange as one_statement
from queuectl.store.sql import SqlStore
from queuectl.store.postgres.schema import CHANNEL, MIGRATIONS, SCHEMA, SCHEMA_VERSION, TABLES

try:
    import psycopg
    from psycopg import conninfo as _conninfo
except ImportError as _e:  # psycopg itself, or its libpq
    psycopg = None
    _IMPORT_ERROR = str(_e)

#: Seconds a connection attempt may take before it fails. The worker's one thread waits meanwhile
#: (its jobs run on, but their output is not read), so it is kept short.
CONNECT_TIMEOUT = 5
#: TCP settings (libpq parameters) that let a connection to a server that vanished (its host lost
#: power, the network went) fail within about 10 s instead of the kernel's 15 minutes, so that the
#: worker's retry loop takes over well within WatchdogSec. A URI that sets one keeps its own value.
TCP_FAILFAST = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                "tcp_user_timeout": 10_000}
#: Seconds between reconnection attempts after a failure: doubling from MIN up to MAX (so a server
#: that comes back is found within RECONNECT_MAX seconds).
RECONNECT_MIN, RECONNECT_MAX = 0.5, 4.0
#: Seconds a worker waits for its own test notification (wakeup_source); it comes in milliseconds.
PROBE_TIMEOUT = 5.0
#: Advisory lock keys (pg_advisory_xact_lock): schema migration, counter folding.
LOCK_MIGRATE, LOCK_FOLD = 0x51435401, 0x51435402


def _missing_driver() -> InvalidConfig:
    return InvalidConfig("a PostgreSQL database needs psycopg 3: apt-get install python3-psycopg"
                         f" (in a virtualenv of the source tree: pip install -e '.[postgresql]'); {_IMPORT_ERROR}")


class Row(tuple):
    """A result row addressable by index and by column name, as sqlite3.Row is."""

    names: dict[str, int]

    def __new__(cls, values, names: dict[str, int]):
        row = super().__new__(cls, values)
        row.names = names
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


def _row_factory(cursor):
    names = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, names)


_PLACEHOLDER = re.compile(r"\?")
#: A table of the queue's schema named bare where a statement names a table (after FROM, JOIN,
#: INTO, UPDATE, TABLE, ANALYZE or VACUUM; the shared queries use no comma joins): qualified
#: with the schema, so that no query depends on a search_path, which a pooler in transaction
#: mode (PgBouncer) cannot keep per client. Column names (workers.queues) are left alone.
_TABLE = re.compile(r"\b(FROM|JOIN|INTO|UPDATE|TABLE|ANALYZE|VACUUM)(\s+)(" + "|".join(TABLES) + r")\b(?![.\w])",
                    re.IGNORECASE)


def qualify(sql: str) -> str:
    """Return a shared query (sql.py's `?` placeholders, bare table names) in psycopg's dialect.

    Placeholders become `%s`; the queue's tables (postgres_schema.TABLES) are qualified with
    the schema where the query names a table. Tests check that TABLES lists every table the
    migrations make, and the PostgreSQL tests run with the server's default search_path.
    """
    return _TABLE.sub(r"\1\2" + SCHEMA + r".\3", _PLACEHOLDER.sub("%s", sql))


class _Connection:
    """A psycopg connection that takes the shared queries (see `qualify`)."""

    def __init__(self, conn):
        self.conn = conn

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def _sql(sql: str) -> str:
        return qualify(sql)

    def execute(self, sql: str, params=()):
        return self.conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(self._sql(sql), rows)


class _ReadOnlyConnection(_Connection):
    """A _Connection whose every statement runs in a transaction of its own begun READ ONLY (its connection's
    `read_only` is set): the server refuses any write, also through a pooler in transaction mode, where a
    session setting (default_transaction_read_only) would outlive the transaction."""

    def execute(self, sql: str, params=()):
        with self.conn.transaction():
            return self.conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows) -> None:
        with self.conn.transaction():
            super().executemany(sql, rows)


class _Wakeups:
    """The LISTEN connection of one worker: `fileno()` for its select(), `take()` to consume what came."""

    def __init__(self, conn):
        self.conn = conn

    def fileno(self) -> int:
        return self.conn.fileno()

    def take(self) -> int:
        """Read what the server sent; return how many notifications (0 when the connection broke: see `broken`).

        The connection is left for its owner to close: libpq may have closed its socket already,
        and the caller must stop watching that fd first (PostgresStore.wakeup_source closes it).
        """
        pg = self.conn.pgconn
        try:
            pg.consume_input()
        except psycopg.Error:
            return 0
        n = 0
        while pg.notifies() is not None:
            n += 1
        return n

    def wait_for(self, payload: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a notification carrying `payload`; True if it came."""
        pg, deadline = self.conn.pgconn, time.monotonic() + timeout
        while True:
            try:
                pg.consume_input()
            except psycopg.Error:
                return False
            while (n := pg.notifies()) is not None:
                if n.extra == payload.encode():
                    return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([self.fileno()], [], [], left)

    @property
    def broken(self) -> bool:
        """True once the connection is closed or lost (its fd may already be closed, or another file's)."""
        return self.conn.closed or self.conn.broken or self.conn.pgconn.status != psycopg.pq.ConnStatus.OK

    def close(self) -> None:
        self.conn.close()


class PostgresStore(SqlStore):
    """A queuectl queue in the `queuectl` schema of a PostgreSQL database.

    `uri` is a libpq connection URI (postgresql://user@host/dbname,
    postgresql:///queuectl?host=/run/postgresql, postgresql://?service=queuectl).
    `defaults` replaces built-in setting defaults (from the site configuration file).
    Every commit is synchronous as the server's synchronous_commit (on by default) makes it: a
    lost claim would let a second worker run a job that still runs, a lost end would run a job
    again (docs/semantics.md, Durability). Raises InvalidConfig
    without psycopg, InvalidInput for a malformed URI or a foreign schema, DatabaseError
    when the server cannot be reached or its schema is newer than this queuectl.
    """

    FOR_SHARE = " FOR SHARE"
    FOR_UPDATE = " FOR UPDATE"
    SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
    FIND = "strpos({0}, {1})"
    ID_ORDER = 'id COLLATE "C"'  # the jobs_id_c index's order, whatever the database's locale
    COUNTS_FROM = ("(SELECT queue, state, sum(n)::bigint AS n FROM (SELECT queue, state, n FROM job_counts"
                   " UNION ALL SELECT queue, state, n FROM job_count_deltas) d GROUP BY queue, state) c")
    RUNS_FROM = ("(SELECT queue, outcome, sum(n)::bigint AS n FROM (SELECT queue, outcome, n FROM job_runs"
                 " UNION ALL SELECT queue, outcome, n FROM job_run_deltas) d GROUP BY queue, outcome) r")

    ACTIVITY_TABLES = ("activity", "activity_deltas")

    def __init__(self, uri: str, *, defaults: dict[str, Any] | None = None,
                 session: bool = False, read_only: bool = False):
        if psycopg is None:
            raise _missing_driver()
        self.UniqueViolation = psycopg.errors.UniqueViolation
        self.uri = uri
        self.session = session
        self.read_only = read_only
        self.defaults = {**settings_mod.defaults(), **(defaults or {})}
        params = _parse(uri)
        self._tcp = {k: v for k, v in TCP_FAILFAST.items() if k not in params}
        self._display = self._redact(_display(params))  # a malformed user part can land in host, port or dbname
        self._conn = None
        self._connect_error: DatabaseError | None = None  # the last failure, repeated until the next try
        self._retry_at = 0.0
        self._pause = RECONNECT_MIN
        self._offset: float | None = None  # server wall clock minus this host's CLOCK_BOOTTIME
        self._wakeups: _Wakeups | None = None
        self._session_checked = False
        self._limits_seen: frozenset[str] = frozenset()  # the limited queues the last claim saw (exchange)
        self._connection()
        with self._errors():
            self._migrate()

    # -- connection -------------------------------------------------------------------------

    def describe(self) -> str:
        """The URI without its password (and without options)."""
        return self._display

    def can_write(self) -> str | None:
        """Return None if this login may change jobs and queues, else why not (its role lacks UPDATE on them)."""
        with self._errors():
            row = self.c.execute(f"SELECT has_table_privilege('{SCHEMA}.jobs', 'UPDATE'),"
                                 f" has_table_privilege('{SCHEMA}.queues', 'UPDATE')").fetchone()
        return None if row[0] and row[1] else "the role may not update jobs and queues"

    def close(self) -> None:
        """Close the connections."""
        for conn in (self._conn, self._wakeups):
            if conn is not None:
                conn.close()
        self._conn = self._wakeups = None

    def _connect(self):
        """Open a connection (autocommit); raises DatabaseError.

        Nothing that a pooler in transaction mode (PgBouncer) refuses or loses: no startup
        option (Debian's PgBouncer refuses `options`), no search_path (queries name the schema,
        see `qualify`), and prepared statements only in a session store (a worker, which checks
        that its connection is a session of its own: `wakeup_source`).
        """
        try:
            conn = psycopg.connect(self.uri, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                                   application_name="queuectl", row_factory=_row_factory, **self._tcp)
        except psycopg.Error as e:
            reason = self._redact(_first_line(e))
            if "connection is bad" in reason and "invalid" in reason:  # libpq checks some values only here
                raise InvalidInput(f"not a valid PostgreSQL URI: {uri_error(reason, self.uri)}") from None
            raise DatabaseUnavailable(f"cannot connect to database {self._display}: {reason}") from None
        if not self.session:
            conn.prepare_threshold = None  # a pooler may run the next transaction on another server connection
        if self.read_only:
            conn.read_only = True  # every transaction begins READ ONLY (see _ReadOnlyConnection)
        return conn

    def _connection(self):
        """The open connection, opened again if it was lost (at most once per back-off period)."""
        if self._conn is not None and not (self._conn.closed or self._conn.broken):
            return self._conn
        now = time.monotonic()
        if now < self._retry_at and self._connect_error is not None:
            raise DatabaseUnavailable(str(self._connect_error))
        try:
            self._conn = self._connect()
        except DatabaseError as e:
            self._connect_error = e
            self._retry_at = now + self._pause
            self._pause = min(self._pause * 2, RECONNECT_MAX)
            raise
        self._pause, self._connect_error = RECONNECT_MIN, None
        return self._conn

    @property
    def c(self) -> _Connection:
        return (_ReadOnlyConnection if self.read_only else _Connection)(self._connection())

    def _redact(self, text: str) -> str:
        """`text` without any candidate password of the URI (queuectl.domain.dburi.redact)."""
        return redact(text, self.uri)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn psycopg errors into one-line queuectl errors, never with the password."""
        try:
            yield
        except psycopg.errors.UniqueViolation:
            raise  # callers turn constraint failures into domain errors
        except UnicodeEncodeError as e:
            raise InvalidInput(f"not valid UTF-8 text: {e.object!r}") from None
        except psycopg.errors.InsufficientPrivilege as e:
            raise PermissionDenied(f"permission denied: database {self._display}: {self._redact(_first_line(e))}"
                                   ) from None
        except psycopg.errors.DiskFull as e:
            raise DatabaseUnavailable(f"database {self._display}: {self._redact(_first_line(e))}"
                                      " (the server's disk is full)") from None
        except psycopg.DataError as e:
            raise InvalidInput(f"database {self._display}: {self._redact(_first_line(e))}") from None
        except psycopg.Error as e:
            if self.read_only and isinstance(e, psycopg.errors.ReadOnlySqlTransaction):  # not a standby's refusal
                raise PermissionDenied(f"refused: database {self._display} was opened read-only here") from None
            if self._conn is not None and self._conn.broken:
                raise DatabaseUnavailable(f"lost the connection to database {self._display}:"
                                          f" {self._redact(_first_line(e))}") from None
            raise DatabaseError(f"database {self._display}: {self._redact(_first_line(e))}") from None

    @contextmanager
    def _write(self) -> Iterator[_Connection]:
        """Run the block in one transaction (READ COMMITTED; claims lock rows); roll back on any exception."""
        with self._errors():
            conn = self._connection()
            with conn.transaction():
                yield _Connection(conn)

    def _migrate(self) -> None:
        version = self._version(self.c)
        if version == SCHEMA_VERSION:
            return  # the common path: one read, no lock
        if version is not None and version > SCHEMA_VERSION:
            raise DatabaseError(f"database {self._display} has queuectl schema version {version}, newer than this"
                                f" queuectl's {SCHEMA_VERSION}; upgrade queuectl")
        with self._write() as c:
            c.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_MIGRATE,))  # one migrator at a time
            version = self._version(c)  # another process may have won
            if version is None:
                if c.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (SCHEMA,)).fetchone():
                    raise InvalidInput(f"database {self._display} has a schema {SCHEMA!r} that is not queuectl's")
                c.execute(f"CREATE SCHEMA {SCHEMA}")
                c.execute("CREATE TABLE schema_version (version integer NOT NULL)")
                c.execute("INSERT INTO schema_version VALUES (0)")
                version = 0
            c.conn.execute(f"SET LOCAL search_path = {SCHEMA}")  # for the migrations' bare names
            for step in range(version + 1, SCHEMA_VERSION + 1):
                c.conn.execute(MIGRATIONS[step])  # several statements: no parameters, no placeholders
                c.execute("UPDATE schema_version SET version = ?", (step,))

    @staticmethod
    def _version(c) -> int | None:
        # A query of the catalog, not to_regclass(): that reads a catalog cache which may not yet
        # show the schema another migrator committed while this one waited for the lock.
        if c.execute("SELECT 1 FROM pg_tables WHERE schemaname = ? AND tablename = 'schema_version'",
                     (SCHEMA,)).fetchone() is None:
            return None
        return c.execute("SELECT version FROM schema_version").fetchone()[0]

    # -- time ---------------------------------------------------------------------------------

    def clock(self) -> float:
        """The server's wall clock now, in Unix seconds: its last reading carried on by CLOCK_BOOTTIME."""
        if self._offset is None:
            self._sync_clock()
        return time.clock_gettime(time.CLOCK_BOOTTIME) + self._offset

    def _sync_clock(self) -> None:
        """Read the server's clock (the round trip's midpoint is taken as the moment it was read)."""
        with self._errors():
            before = time.clock_gettime(time.CLOCK_BOOTTIME)
            server = self.c.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
            after = time.clock_gettime(time.CLOCK_BOOTTIME)
        self._offset = server - (before + after) / 2

    # -- the operations that are PostgreSQL's own, claims, wake-ups, maintenance ------------------

    exchange = one_statement.exchange  # the hot path in one statement, else queuectl.store.exchange's
    purge = operator.purge
    _claim_rows = staticmethod(one_statement.claim_rows)
    _update_returning = staticmethod(one_statement.update_returning)

    def heartbeat(self, worker_id: int, now: Instant | float) -> bool:
        """Record the heartbeat (queuectl.store.workers.heartbeat), then read the server's clock again."""
        alive = workers.heartbeat(self, worker_id, now)
        self._sync_clock()
        return alive

    def compact(self) -> None:
        """Nothing: PostgreSQL's autovacuum makes freed space reusable by itself."""
        return None

    def _notify(self, c) -> None:
        c.execute(f"NOTIFY {CHANNEL}")  # delivered at commit; one per transaction, however many rows

    def wakeup_source(self) -> _Wakeups | None:
        """This worker's LISTEN connection (opened, or opened again if it broke); None while it cannot be.

        The first one opened is checked to be a session of its own: a NOTIFY sent from the
        store's other connection must reach it within PROBE_TIMEOUT seconds. Behind a pooler in
        transaction mode it never does (LISTEN stays on a server connection that the pooler
        hands to other clients), so InvalidConfig is raised saying that workers need a direct
        connection (worker-db). Raises DatabaseError if the check's NOTIFY fails.
        """
        if self._wakeups is not None and not self._wakeups.broken:
            return self._wakeups
        if self._wakeups is not None:
            self._wakeups.close()
            self._wakeups = None
        try:
            conn = self._connect()
            conn.execute(f"LISTEN {CHANNEL}")
        except (DatabaseError, psycopg.Error):
            return None
        wakeups = _Wakeups(conn)
        if not self._session_checked:
            try:
                self._check_session(wakeups)
            except BaseException:
                wakeups.close()
                raise
            self._session_checked = True
        self._wakeups = wakeups
        return wakeups

    def _check_session(self, wakeups: _Wakeups) -> None:
        token = f"probe-{uuid.uuid4().hex}"
        with self._errors():
            self.c.execute("SELECT pg_notify(?, ?)", (CHANNEL, token))
        if not wakeups.wait_for(token, PROBE_TIMEOUT):
            raise InvalidConfig(
                f"database {self._display}: a notification sent through it did not come back within"
                f" {PROBE_TIMEOUT:g} s, as behind a pooler in transaction mode (PgBouncer): a worker needs a"
                " connection of its own; give workers a direct URI with worker-db in the configuration file"
                " or QUEUECTL_WORKER_DB")

    def maintain(self, worker_id: int) -> None:
        """Fold the counter deltas into their totals, in one short transaction, by one worker at a time."""
        with self._write() as c:
            if not c.execute("SELECT pg_try_advisory_xact_lock(?)", (LOCK_FOLD,)).fetchone()[0]:
                return  # another worker is folding
            c.execute("WITH d AS (DELETE FROM job_count_deltas RETURNING queue, state, n)"
                      " INSERT INTO job_counts (queue, state, n) SELECT queue, state, sum(n) FROM d"
                      " GROUP BY queue, state ON CONFLICT (queue, state) DO UPDATE SET n = job_counts.n + excluded.n")
            c.execute("WITH d AS (DELETE FROM job_run_deltas RETURNING queue, outcome, n)"
                      " INSERT INTO job_runs (queue, outcome, n) SELECT queue, outcome, sum(n) FROM d"
                      " GROUP BY queue, outcome ON CONFLICT (queue, outcome) DO UPDATE SET n = job_runs.n + excluded.n")
            c.execute(activity.FOLD_DELTAS)


def _parse(uri: str) -> dict:
    """The URI's connection parameters (libpq's parser); raises InvalidInput that never quotes the URI."""
    why = None
    if "\0" in uri:
        why = "it holds a NUL character"  # libpq would read it as the URI's end
    else:
        try:
            return _conninfo.conninfo_to_dict(uri)
        except psycopg.Error as e:
            why = uri_error(_first_line(e), uri)
        except UnicodeEncodeError:  # a byte that is not UTF-8 (the shell's argument, as a surrogate)
            why = "it is not UTF-8 text"
        except UnicodeDecodeError:  # psycopg decodes libpq's percent-decoded values as UTF-8
            why = "a percent-encoded value is not UTF-8 text"
    raise InvalidInput(f"not a valid PostgreSQL URI: {why}")


def _first_line(error: Exception) -> str:
    """A psycopg error's message as one line (libpq's lines joined by "; ")."""
    lines = [" ".join(line.split()) for line in str(error).splitlines()]
    return "; ".join(line for line in lines if line) or type(error).__name__


def _display(params: dict) -> str:
    """A connection's parameters as a URI without password or options.

    Several hosts (a failover pair: postgresql://u@h1:5432,h2:5433/db) are shown as the URI gives
    them, each with its own port, and with the target_session_attrs that chooses among them. A
    socket directory among them moves every host to the query (?host=/run/postgresql,h2&port=,5433).
    """
    user = f"{params['user']}@" if params.get("user") else ""
    hosts = params.get("host", "").split(",")
    ports = params.get("port", "").split(",")
    if len(ports) == 1:  # one port for every host (libpq's rule)
        ports *= len(hosts)
    query = []
    if any(h.startswith("/") for h in hosts):
        query.append(f"host={','.join(hosts)}")
        if any(ports):
            query.append(f"port={','.join(ports)}")
        netloc = ""
    else:
        netloc = ",".join(host + (f":{port}" if port else "") for host, port in zip_longest(hosts, ports, fillvalue=""))
    query += [f"{key}={params[key]}" for key in ("service", "target_session_attrs") if params.get(key)]
    dbname = f"/{params['dbname']}" if params.get("dbname") else ""
    return f"postgresql://{user}{netloc}{dbname}" + ("?" + "&".join(query) if query else "")


__all__ = ["PostgresStore", "CHANNEL"]
