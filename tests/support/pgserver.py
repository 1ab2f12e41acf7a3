"""A real, throwaway PostgreSQL server that the test session starts itself (initdb + pg_ctl).

The server lives in a fresh directory under /tmp: its data directory, its log and its Unix socket.
It listens on 127.0.0.1 on a free port and on that socket, with settings for tests (fsync off) and
trust authentication, except for the role `qpass`, which must give its password ('s3cret-pw') over
TCP. `PgServer(durable=True)` keeps a real server's durability instead (fsync, full_page_writes and
synchronous_commit on), for measurements (bench/run.py). Run as root, initdb and pg_ctl run as the
system user postgres (initdb refuses root).

    server = PgServer()
    server.start()
    uri = server.create_database()   # postgresql://postgres@127.0.0.1:PORT/qtest_...
    ...
    server.cleanup()

Every server takes replication connections (pg_hba: `replication` trusted on 127.0.0.1), so that
`standby()` can copy it into a streaming standby (pg_basebackup -R) that `promote()` turns into a
primary; `standby(synchronous=True)` makes the primary wait for that standby at each commit:

    standby = server.standby()        # streaming from server; read-only until promoted
    server.stop("immediate")          # the primary fails
    standby.promote()                 # the standby takes writes

psycopg is imported only when a server is used, so that this module imports without it.
"""

from __future__ import annotations

import importlib
import atexit
import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

SERVER_USER = "postgres"  # the system user that runs the server when the tests run as root
READY_TIMEOUT = 30.0
# Longest socket path libpq and the server accept is 107 bytes; leave room for ".s.PGSQL.65535".
MAX_SOCKET_DIR = 90


def _version_key(bindir: str) -> tuple[int, ...]:
    name = Path(bindir).parent.name
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl: the highest version under /usr/lib/postgresql, else pg_config's."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    for bindir in candidates:
        if all(os.access(Path(bindir) / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(bindir)
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll_until(predicate, what: str, timeout: float = READY_TIMEOUT, interval: float = 0.1):
    """Call `predicate()` every `interval` seconds until it returns a truthy value, and return that value.

    Raises RuntimeError naming `what` when `timeout` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} after {timeout:g} s")
        time.sleep(interval)
    return value


def wait_connectable(connect, what: str, log, alive=lambda: True) -> None:
    """Until `connect()` gives a connection that answers SELECT 1, up to READY_TIMEOUT seconds.

    Raises RuntimeError with `log()` when the time runs out or `alive()` turns False (the process exited).
    """
    import psycopg

    failure = []

    def answers() -> bool:
        if not alive():
            raise RuntimeError(f"{what} exited:\n{log()}")
        try:
            with connect() as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError as e:
            failure[:] = [e]
            return False

    try:
        poll_until(answers, f"{what} accepts no connections")
    except RuntimeError as e:
        raise RuntimeError(f"{e}: {failure[-1] if failure else ''}\n{log()}") from None


def _pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the postmaster's server processes)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


class PgServer:
    """One PostgreSQL server in its own temporary directory; see the module's docstring."""

    host = "127.0.0.1"
    superuser = "postgres"
    password_role = "qpass"
    password = "s3cret-pw"
    _names = itertools.count(1)

    @staticmethod
    def missing() -> str | None:
        """Why a server cannot be started here (with the package that fixes it), or None if it can."""
        if find_bindir() is None:
            return "the PostgreSQL server binaries (initdb, pg_ctl) are not installed (apt-get install postgresql)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(SERVER_USER)
            except KeyError:
                return (f"running as root, the server must run as the system user {SERVER_USER},"
                        " which does not exist (apt-get install postgresql creates it)")
            if shutil.which("runuser") is None:
                return "running as root needs runuser to start the server as postgres (apt-get install util-linux)"
        try:
            importlib.import_module("psycopg")
        except ImportError as e:
            if "libpq" in str(e):
                return f"psycopg cannot load libpq (apt-get install libpq5): {e}".replace("\n", " ")
            return f"psycopg is not importable (pip install psycopg): {e}".replace("\n", " ")
        return None

    def __init__(self, base: Path | None = None, durable: bool = False):
        """`base`: where the server's temporary directory is made (default /tmp); `durable`: commits
        reach the disk (fsync, full_page_writes, synchronous_commit on) instead of the tests' fsync off.
        Nothing starts yet."""
        self.base = Path(base) if base is not None else Path("/tmp")
        self.durable = durable
        self.dir: Path | None = None  # the temporary directory: data/, server.log, the socket
        self.data: Path | None = None
        self.log: Path | None = None
        self.socket_dir: str | None = None
        self.port: int | None = None
        self.bindir: Path | None = None
        self._socket_tmp: Path | None = None  # a separate socket directory when self.dir is too long
        self._as_root = os.geteuid() == 0
        self._owner_pid = os.getpid()
        self._atexit = False
        self.settings: dict[str, str] = {}  # more settings of this server (configure()), beyond the tests' own
        self.primary: PgServer | None = None  # of a standby: the server it was copied from
        self.slot: str | None = None  # of a standby: its replication slot on the primary, and application_name

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> "PgServer":
        """Create the cluster on first use, start the server and wait until it accepts connections.

        After `stop()` or `kill()` this starts the same cluster again (crash recovery after a kill),
        on the same port.
        """
        if self.data is None:
            self._init()
            self._first_start()
            self._create_password_role()
        else:
            self._pg_ctl("start")
            self._wait_ready()
        return self

    def standby(self, name: str = "standby1", synchronous: bool = False) -> "PgServer":
        """Make, start and return a streaming standby of this (running) server, on a free port.

        The standby is a copy by `pg_basebackup -R` through a replication slot `name` on this server
        (so that no WAL it still needs is removed), streams under the application_name `name`, and
        takes read-only queries; `promote()` makes it a primary. `synchronous`: this server then lists
        it in `synchronous_standby_names`, so that every commit here returns only once the standby has
        flushed it (synchronous_commit is on). Returns when the standby streams (and, if synchronous,
        is this server's synchronous standby), within READY_TIMEOUT seconds; raises RuntimeError
        otherwise, or when pg_basebackup fails. `cleanup()` of the standby drops its slot here (and
        takes it out of synchronous_standby_names), if this server still runs.
        """
        standby = PgServer(self.base, durable=self.durable)
        standby.primary, standby.slot = self, name
        standby._make_dir()
        standby._run("pg_basebackup", "-D", str(standby.data), "-d",
                     f"host={self.host} port={self.port} user={self.superuser} application_name={name}",
                     "-R", "-C", "-S", name, "-X", "stream", "--checkpoint=fast", "--no-sync")
        standby.port = free_port()
        standby._write_settings()
        standby._first_start()
        if synchronous:
            self.configure(synchronous_standby_names=f"'{name}'")
        want = "sync" if synchronous else "async"
        standby._poll(lambda: self.sql("SELECT 1 FROM pg_stat_replication WHERE application_name = %s"
                                       " AND state = 'streaming' AND sync_state = %s", params=(name, want)),
                      f"no standby {name} streaming ({want}) from port {self.port}")
        return standby

    def promote(self) -> None:
        """`pg_ctl promote` this standby and wait until it takes writes (up to READY_TIMEOUT seconds).

        Raises RuntimeError when pg_ctl fails or the server stays read-only.
        """
        self._run("pg_ctl", "promote", "-D", str(self.data), "-w", "-t", str(int(READY_TIMEOUT)),
                  timeout=READY_TIMEOUT + 30)
        self._poll(lambda: self.sql("SELECT NOT pg_is_in_recovery()")[0][0], "the promoted server still in recovery")

    def configure(self, **settings: str) -> None:
        """Set server settings (values as postgresql.conf writes them, quoted where needed) and reload.

        They go into the tests' settings file (not ALTER SYSTEM's postgresql.auto.conf), which a
        standby does not keep: it writes its own. Raises RuntimeError when the reload fails.
        """
        self.settings.update(settings)
        self._write_settings()
        if self.running():
            self._run("pg_ctl", "reload", "-D", str(self.data))

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m MODE` (smart, fast or immediate), waiting until the server is down."""
        self._pg_ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m MODE`, then wait until it accepts connections again (same port, same data)."""
        self._pg_ctl("restart", "-m", mode)
        self._wait_ready()

    def kill(self) -> None:
        """SIGKILL the postmaster and its server processes at once, as a crash would; `start()` recovers."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        victims = [pid, *_children(pid)]
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Wait until every one is dead: a new postmaster refuses shared memory still attached.
        poll_until(lambda: not any(_pid_alive(p) for p in victims),
                   f"server processes {victims} still alive after SIGKILL", interval=0.02)
        # The dead postmaster may stay a zombie for a while (until init reaps it: over a second on
        # some VMs); a new postmaster and pg_ctl would take its lock files for a live server's.
        if Path(f"/proc/{pid}").exists():
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            Path(self.socket_dir, f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)

    def running(self) -> bool:
        """True while the postmaster of this server is alive."""
        return self.postmaster_pid() is not None

    def cleanup(self) -> None:
        """Stop the server (immediate, or SIGKILL if that fails) and remove its directory. Idempotent."""
        if os.getpid() != self._owner_pid or self.dir is None:
            return
        if self.running():
            try:
                self.stop("immediate")
            except (RuntimeError, subprocess.SubprocessError):
                pass
            self.kill()  # whatever stop left (nothing, normally)
        self._leave_primary()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._socket_tmp is not None:
            shutil.rmtree(self._socket_tmp, ignore_errors=True)
        self.dir = self.data = self.log = self._socket_tmp = None

    def __enter__(self) -> "PgServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()

    # -- using it --------------------------------------------------------------------------------

    def uri(self, dbname: str, user: str = "postgres", password: str | None = None) -> str:
        """`postgresql://USER[:PASSWORD]@127.0.0.1:PORT/DBNAME` (TCP)."""
        from urllib.parse import quote

        auth = quote(user, safe="")
        if password is not None:
            auth += ":" + quote(password, safe="")
        return f"postgresql://{auth}@{self.host}:{self.port}/{quote(dbname, safe='')}"

    def connect(self, dbname: str = "postgres", user: str = "postgres", **kw):
        """A psycopg connection over TCP (autocommit unless told otherwise)."""
        import psycopg

        kw.setdefault("autocommit", True)
        kw.setdefault("connect_timeout", 10)
        return psycopg.connect(host=self.host, port=self.port, dbname=dbname, user=user, **kw)

    def sql(self, statement: str, dbname: str = "postgres", params=None) -> list[tuple]:
        """Run one statement as the superuser (autocommit); its rows, or [] if it returns none."""
        with self.connect(dbname) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description is not None else []

    def create_database(self, name: str | None = None, owner: str = "postgres") -> str:
        """Create a fresh database (a unique name unless `name` is given) owned by `owner`.

        Returns its TCP URI for the superuser; `uri(name, user, password)` gives another role's.
        """
        from psycopg import sql

        if name is None:
            name = f"qtest_{os.getpid()}_{next(self._names)}_{uuid.uuid4().hex[:8]}"
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner)))
        return self.uri(name)

    def drop_database(self, name: str, force: bool = True) -> None:
        """DROP DATABASE IF EXISTS, by default WITH (FORCE): connected sessions are ended first."""
        from psycopg import sql

        query = sql.SQL("DROP DATABASE IF EXISTS {}" + (" WITH (FORCE)" if force else "")).format(sql.Identifier(name))
        with self.connect() as conn:
            conn.execute(query)

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid from postmaster.pid, if that process is alive."""
        if self.data is None:
            return None
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if _pid_alive(pid) else None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, AttributeError):
            return "(no server log)"

    # -- internals -------------------------------------------------------------------------------

    def _run(self, tool: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a server binary, as the postgres user when we are root, from the server's directory."""
        cmd = [str(self.bindir / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", SERVER_USER, "--", *cmd]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        proc = subprocess.run(cmd, cwd=self.dir, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}\n"
                               f"server log ({self.log}):\n{self.log_tail()}")
        return proc

    def _pg_ctl(self, action: str, *args: str) -> None:
        self._run("pg_ctl", action, "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(int(READY_TIMEOUT)),
                  *args, timeout=READY_TIMEOUT + 30)

    def _init(self) -> None:
        """Make the directory and a fresh cluster in it (initdb) with the tests' settings."""
        self._make_dir()
        self._run("initdb", "-D", str(self.data), "-U", self.superuser, "--auth=trust",
                  "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
        (self.data / "pg_hba.conf").write_text(
            "# queuectl tests: trust, except qpass, which must give its password over TCP\n"
            "local all all trust\n"
            f"host all {self.password_role} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
            "host replication all 127.0.0.1/32 trust\n"
        )
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# queuectl tests (tests/support/pgserver.py)\ninclude_if_exists = 'queuectl_test.conf'\n")
        self.port = free_port()
        self._write_settings()

    def _first_start(self) -> None:
        """Start a new cluster, on another free port if another process took this one meanwhile."""
        for attempt in range(3):
            try:
                self._pg_ctl("start")
                break
            except RuntimeError:
                # Another process may have taken the port between free_port() and the bind.
                if attempt == 2 or "could not bind" not in self.log_tail():
                    raise
                self.port = free_port()
                self._write_settings()
        self._wait_ready()

    def _poll(self, predicate, what: str) -> None:
        """poll_until(predicate, what) for up to READY_TIMEOUT seconds; its RuntimeError ends with this server's log."""
        try:
            poll_until(predicate, what)
        except RuntimeError as e:
            raise RuntimeError(f"{e}; server log ({self.log}):\n{self.log_tail()}") from None

    def _leave_primary(self) -> None:
        """Of a stopped standby whose primary still runs: let the primary's commits wait for it no more
        and drop its replication slot there (which keeps WAL for it). Best effort: nothing otherwise."""
        if self.slot is None or self.primary is None or not self.primary.running():
            return
        try:
            if self.primary.settings.get("synchronous_standby_names") == f"'{self.slot}'":
                del self.primary.settings["synchronous_standby_names"]
                self.primary.configure()  # a commit waiting for this standby returns now
            self.primary.sql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                             " WHERE slot_name = %s", params=(self.slot,))
        except Exception:  # noqa: BLE001 - the primary's own cleanup removes it all anyway
            pass

    def _make_dir(self) -> None:
        """Make the server's temporary directory (owned by the server user) and choose its socket directory."""
        self.bindir = find_bindir()
        if self.bindir is None:
            raise RuntimeError(self.missing() or "no PostgreSQL binaries")
        self.dir = Path(tempfile.mkdtemp(prefix="pgq.", dir=self.base))
        self._register_atexit()
        os.chmod(self.dir, 0o755)
        if len(str(self.dir)) <= MAX_SOCKET_DIR:
            self.socket_dir = str(self.dir)
        else:
            self._socket_tmp = Path(tempfile.mkdtemp(prefix="pgq.", dir="/tmp"))
            os.chmod(self._socket_tmp, 0o755)
            self.socket_dir = str(self._socket_tmp)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.log.touch()
        if self._as_root:
            server_user = pwd.getpwnam(SERVER_USER)
            for path in filter(None, (self.dir, self.log, self._socket_tmp)):
                os.chown(path, server_user.pw_uid, server_user.pw_gid)
            probe = subprocess.run(["runuser", "-u", SERVER_USER, "--", "test", "-w", str(self.dir)])
            if probe.returncode != 0:
                raise RuntimeError(f"the user {SERVER_USER} cannot reach {self.dir}: use a base directory it can enter")

    def _write_settings(self) -> None:
        settings = self.data / "queuectl_test.conf"
        durability = ("fsync = on\nfull_page_writes = on\nsynchronous_commit = on\n" if self.durable
                      else "fsync = off\nfull_page_writes = off\n")
        settings.write_text(
            f"port = {self.port}\n"
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.socket_dir}'\n"
            f"{durability}"
            "max_connections = 200\n"
            "password_encryption = 'scram-sha-256'\n"
            # A standby copies this server (standby()); 'replica' and 10 are PostgreSQL's defaults.
            "wal_level = replica\n"
            "max_wal_senders = 10\n"
            "max_replication_slots = 10\n"
            + "".join(f"{key} = {value}\n" for key, value in self.settings.items())
        )
        if self._as_root:
            server_user = pwd.getpwnam(SERVER_USER)
            for path in (settings, self.data / "pg_hba.conf", self.data / "postgresql.conf"):
                os.chown(path, server_user.pw_uid, server_user.pw_gid)

    def _wait_ready(self) -> None:
        """Until a connection succeeds, up to READY_TIMEOUT seconds (pg_ctl -w has mostly waited already)."""
        wait_connectable(lambda: self.connect(connect_timeout=2), "the server",
                         lambda: f"server log ({self.log}):\n{self.log_tail()}")

    def _create_password_role(self) -> None:
        from psycopg import sql

        with self.connect() as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(self.password_role), sql.Literal(self.password)))

    def _register_atexit(self) -> None:
        # A session that dies without its teardown (an error in a fixture, Ctrl-C) still stops the server.
        if not self._atexit:
            atexit.register(self.cleanup)
            self._atexit = True
