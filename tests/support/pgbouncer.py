"""A real PgBouncer (Debian's package) that a test starts in front of a PgServer, on a loopback port.

Its settings are Debian's defaults (/etc/pgbouncer/pgbouncer.ini sets none that matter here),
with transaction pooling: no `ignore_startup_parameters`, so a client that sends a startup
option such as `options` is refused, as it is at a site that installs the package and sets
`pool_mode = transaction`. Authentication is trust for the server's superuser (the server
trusts it too). Run as root, PgBouncer runs as the system user postgres (it refuses root).

    bouncer = PgBouncer(server).start()
    uri = bouncer.uri(dbname)        # postgresql://postgres@127.0.0.1:PORT/dbname
    bouncer.stop()
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from support.pgserver import SERVER_USER, PgServer, free_port, wait_connectable


class PgBouncer:
    """One pgbouncer process pooling every database of `server`."""

    def __init__(self, server: PgServer, pool_mode: str = "transaction", pool_size: int = 4):
        self.server = server
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.port: int | None = None
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def missing() -> str | None:
        """Why PgBouncer cannot run here (with the package that fixes it), or None if it can."""
        if shutil.which("pgbouncer") is None and not os.access("/usr/sbin/pgbouncer", os.X_OK):
            return "PgBouncer is not installed (apt-get install pgbouncer)"
        return None

    def start(self) -> "PgBouncer":
        """Write the settings, start pgbouncer and wait until a query through it succeeds."""
        self.dir = Path(tempfile.mkdtemp(prefix="pgb.", dir="/tmp"))
        self.port = free_port()
        (self.dir / "userlist.txt").write_text(f'"{self.server.superuser}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={self.server.host} port={self.server.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir}/userlist.txt\n"
            f"pool_mode = {self.pool_mode}\ndefault_pool_size = {self.pool_size}\nmax_client_conn = 200\n"
            f"logfile = {self.dir}/pgbouncer.log\n"
        )
        cmd = [shutil.which("pgbouncer") or "/usr/sbin/pgbouncer", str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            os.chmod(self.dir, 0o755)
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, user.pw_uid, user.pw_gid)
            cmd = ["runuser", "-u", SERVER_USER, "--", *cmd]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self._wait_ready()
        return self

    def uri(self, dbname: str) -> str:
        """A URI of `dbname` on the server, through this pooler."""
        return f"postgresql://{self.server.superuser}@127.0.0.1:{self.port}/{dbname}"

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of pgbouncer's log."""
        try:
            return "\n".join((self.dir / "pgbouncer.log").read_text(errors="replace").splitlines()[-lines:])
        except (OSError, TypeError):
            return "(no pgbouncer log)"

    def stop(self) -> None:
        """Stop pgbouncer (SIGTERM, then SIGKILL after 10 s) and remove its directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _wait_ready(self) -> None:
        import psycopg

        wait_connectable(lambda: psycopg.connect(self.uri("postgres"), connect_timeout=2, autocommit=True),
                         "pgbouncer", self.log_tail, alive=lambda: self.proc.poll() is None)
