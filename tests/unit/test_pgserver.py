"""The PostgreSQL server the tests start themselves (tests/support/pgserver.py and the pg_* fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.engines import BOTH_ENGINES
from support.suite import require_postgres
from support.pgserver import PgServer, _pid_alive

try:
    import psycopg
except ImportError:  # the tests skip (or fail under CI) with PgServer.missing()'s reason
    psycopg = None


def rows(uri: str, statement: str) -> list[tuple]:
    with psycopg.connect(uri, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description is not None else []


def test_server_is_up_with_test_settings(pg_server):
    [(version,)] = pg_server.sql("SHOW server_version_num")
    assert int(version) >= 130000  # DROP DATABASE ... WITH (FORCE)
    settings = dict(pg_server.sql("SELECT name, setting FROM pg_settings WHERE name IN"
                                  " ('fsync', 'full_page_writes', 'max_connections', 'listen_addresses', 'port')"))
    assert settings == {"fsync": "off", "full_page_writes": "off", "max_connections": "200",
                        "listen_addresses": "127.0.0.1", "port": str(pg_server.port)}
    [(user,)] = pg_server.sql("SELECT current_user")
    assert user == pg_server.superuser == "postgres"
    assert pg_server.host == "127.0.0.1"
    assert pg_server.uri("x") == f"postgresql://postgres@127.0.0.1:{pg_server.port}/x"
    assert pg_server.uri("x", "qpass", "pw") == f"postgresql://qpass:pw@127.0.0.1:{pg_server.port}/x"


def test_unix_socket_accepts_the_superuser(pg_server):
    assert Path(pg_server.socket_dir, f".s.PGSQL.{pg_server.port}").is_socket()
    with psycopg.connect(host=pg_server.socket_dir, port=pg_server.port, user="postgres", dbname="postgres") as conn:
        assert conn.execute("SELECT inet_server_addr()").fetchone() == (None,)  # not over TCP


def test_fresh_databases_are_isolated(pg_server, pg_uri):
    other = pg_server.create_database()
    try:
        assert other != pg_uri
        rows(pg_uri, "CREATE TABLE jobs (id text PRIMARY KEY)")
        rows(pg_uri, "INSERT INTO jobs VALUES ('a')")
        assert rows(pg_uri, "SELECT id FROM jobs") == [("a",)]
        assert rows(other, "SELECT to_regclass('jobs')") == [(None,)]
    finally:
        pg_server.drop_database(other.rsplit("/", 1)[1])
    assert pg_server.sql("SELECT 1 FROM pg_database WHERE datname = %s", params=[other.rsplit("/", 1)[1]]) == []


def test_a_named_database_with_an_owner(pg_server):
    pg_server.sql("CREATE ROLE qowner LOGIN")
    try:
        uri = pg_server.create_database("queuectl named", owner="qowner")
        assert uri.endswith("/queuectl%20named")
        assert rows(uri, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()") \
            == [("qowner",)]
        pg_server.drop_database("queuectl named")
    finally:
        pg_server.sql("DROP ROLE qowner")


def test_drop_ends_connected_sessions(pg_server):
    uri = pg_server.create_database()
    conn = psycopg.connect(uri, autocommit=True)
    try:
        pg_server.drop_database(uri.rsplit("/", 1)[1])
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()


def test_restart_keeps_port_and_data(pg_server, pg_uri):
    rows(pg_uri, "CREATE TABLE kept (n int)")
    rows(pg_uri, "INSERT INTO kept VALUES (42)")
    port, pid = pg_server.port, pg_server.postmaster_pid()
    pg_server.restart()
    assert pg_server.port == port
    assert pg_server.postmaster_pid() not in (None, pid)
    assert rows(pg_uri, "SELECT n FROM kept") == [(42,)]


def test_pg_uri_starts_a_stopped_session_server_again(pg_server, request):
    port = pg_server.port
    pg_server.stop()
    assert not pg_server.running()
    uri = request.getfixturevalue("pg_uri")
    assert pg_server.running() and pg_server.port == port
    assert rows(uri, "SELECT 1") == [(1,)]


def test_qpass_needs_its_password_over_tcp(pg_server, monkeypatch, tmp_path):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    no_passfile = str(tmp_path / "no-pgpass")
    uri = pg_server.uri("postgres", "qpass")
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(uri, passfile=no_passfile, connect_timeout=10).close()
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_server.uri("postgres", "qpass", "wrong"), passfile=no_passfile, connect_timeout=10).close()
    with psycopg.connect(pg_server.uri("postgres", "qpass", "s3cret-pw")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("qpass",)
    [(stored,)] = pg_server.sql("SELECT rolpassword FROM pg_authid WHERE rolname = 'qpass'")
    assert stored.startswith("SCRAM-SHA-256$")


@BOTH_ENGINES
def test_db_on_both_engines_gives_a_path_or_a_uri(db, request, tmp_path):
    if request.node.callspec.params["db"] == "sqlite":
        assert db == str(tmp_path / "queue.db")
    else:
        assert db.startswith("postgresql://postgres@127.0.0.1:")
        assert rows(db, "SELECT current_database() LIKE 'qtest_%'") == [(True,)]


def test_own_server_survives_a_kill_and_cleanup_leaves_nothing():
    """A second server, started, crashed and removed here: the session's one stays out of harm's way."""
    require_postgres()
    server = PgServer()
    try:
        server.start()
        uri = server.create_database("crash")
        rows(uri, "CREATE TABLE t (n int)")
        rows(uri, "INSERT INTO t VALUES (1)")
        pid = server.postmaster_pid()
        server.kill()
        assert not _pid_alive(pid) and not server.running()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(uri, connect_timeout=2).close()
        server.start()  # crash recovery on the same port
        assert rows(uri, "SELECT n FROM t") == [(1,)]
        pid, directory = server.postmaster_pid(), server.dir
    finally:
        server.cleanup()
    assert not directory.exists()
    assert not _pid_alive(pid)
    server.cleanup()  # idempotent


def test_a_synchronous_standby_promoted_after_an_immediate_stop_has_every_commit():
    """A primary and its synchronous standby of their own: the session's server stays out of harm's way."""
    require_postgres()
    primary, standby = PgServer(), None
    try:
        primary.start()
        uri = primary.create_database("ha")
        standby = primary.standby("s1", synchronous=True)
        assert standby.port != primary.port and standby.dir != primary.dir
        assert primary.sql("SELECT application_name, state, sync_state FROM pg_stat_replication") \
            == [("s1", "streaming", "sync")]
        assert primary.sql("SHOW synchronous_standby_names") == [("s1",)]
        rows(uri, "CREATE TABLE t (n int)")
        rows(uri, "INSERT INTO t SELECT generate_series(1, 1000)")  # returns once the standby flushed it
        assert standby.sql("SELECT pg_is_in_recovery()") == [(True,)]
        # Flushed is not yet replayed: a statement naming `t` could find no such table. A statement
        # that names nothing of the primary's is refused for being a write, whatever was replayed.
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            standby.sql("CREATE TABLE u (n int)", dbname="ha")
        primary.stop("immediate")
        assert not primary.running()
        standby.promote()
        assert standby.sql("SELECT count(*) FROM t", dbname="ha") == [(1000,)]
        standby.sql("INSERT INTO t VALUES (0)", dbname="ha")  # takes writes, and waits for no standby of its own
        assert standby.sql("SHOW synchronous_standby_names") == [("",)]
    finally:
        for server in filter(None, (standby, primary)):
            server.cleanup()
    assert not primary.running() and not standby.running()
