"""What only the PostgreSQL store has, against a real server the session starts (tests/support/pgserver.py).

Its schema and migrations, connection failures as one line, passwords kept out of every
output, the site configuration naming a server. Workers as real processes against it (wake-ups by
NOTIFY, the server's clock, server restarts): tests/processes/test_postgres_workers.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from support.cli import QUEUECTL, assert_process_error, queuectl
from support.suite import import_or_skip
from support.backdoor import behind_queuectls_back
from support.engines import ON_POSTGRESQL
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable, InvalidInput
from queuectl.domain.models import JobState
from queuectl.store import open_store
from queuectl.store.postgres.schema import SCHEMA_VERSION
from support.pgserver import free_port
from unit import test_store_sqlite

PASSWORD = "s3cret-pw"  # the pg_server fixture's qpass role


pytestmark = ON_POSTGRESQL  # every test's `db` is a PostgreSQL queue


@pytest.fixture
def password_uri(pg_server):
    """A database owned by the role qpass, which logs in with a password over TCP."""
    name = f"pw{os.getpid()}_{time.monotonic_ns()}"
    pg_server.create_database(name, owner="qpass")
    yield pg_server.uri(name, "qpass", PASSWORD)
    pg_server.drop_database(name, force=True)


# -- schema ------------------------------------------------------------------------------------------


def test_the_schema_is_created_once_by_concurrent_first_openers(db, pg_server):
    results: list = []

    def open_it():
        try:
            open_store(db).close()
            results.append("ok")
        except Exception as e:  # noqa: BLE001 - the test reports whatever went wrong
            results.append(repr(e))

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 6
    name = db.rsplit("/", 1)[1]
    assert pg_server.sql("SELECT version FROM queuectl.schema_version", dbname=name) == [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused_and_left_alone(db, pg_server):
    open_store(db).close()
    behind_queuectls_back(db, "UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(DatabaseError, match="newer than this queuectl"):
        open_store(db)
    r = queuectl(db, "status", check=False)
    assert "upgrade queuectl" in assert_process_error(r, 1)


def test_a_foreign_schema_named_queuectl_is_refused(db, pg_server):
    name = db.rsplit("/", 1)[1]
    pg_server.sql("CREATE SCHEMA queuectl", dbname=name)
    pg_server.sql("CREATE TABLE queuectl.jobs (x int)", dbname=name)
    with pytest.raises(InvalidInput, match="not queuectl's"):
        open_store(db)
    assert pg_server.sql("SELECT count(*) FROM queuectl.jobs", dbname=name) == [(0,)]
    assert assert_process_error(queuectl(db, "status", check=False), 2)


def test_the_queue_lives_in_its_own_schema(db, pg_server):
    open_store(db).close()
    name = db.rsplit("/", 1)[1]
    tables = {r[0] for r in pg_server.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'", dbname=name)}
    assert tables == set()  # nothing in the application's own schema


# -- connection failures and passwords -----------------------------------------------------------------


def test_a_server_that_is_not_there_is_one_line_and_exit_1(pg_server):
    port = pg_server.port + 1 if pg_server.port < 65535 else 1
    uri = f"postgresql://nobody:{PASSWORD}@127.0.0.1:{port}/nothing"
    with pytest.raises(DatabaseUnavailable):  # which a worker rides out (queuectl.worker's watchdog rule)
        open_store(uri)
    for args in (("status",), ("enqueue", '{"command":"true"}'), ("list", "--json"), ("worker", "start", "--burst")):
        line = assert_process_error(queuectl(uri, *args, check=False), 1)
        assert "cannot connect to database postgresql://nobody@127.0.0.1:" in line, line
        assert PASSWORD not in line


def test_a_wrong_password_is_one_line_without_the_password(password_uri):
    wrong = password_uri.replace(PASSWORD, "not-" + PASSWORD)
    line = assert_process_error(queuectl(wrong, "status", check=False), 1)
    assert "password authentication failed" in line and PASSWORD not in line, line


def test_a_malformed_uri_is_bad_input(pg_server):
    line = assert_process_error(queuectl(f"postgresql://u:{PASSWORD}@127.0.0.1/x?no_such_option=1", "status", check=False), 2)
    assert "not a valid PostgreSQL URI" in line and PASSWORD not in line, line


def test_values_that_libpq_checks_only_when_it_connects_are_bad_input_too():
    # (Others, such as sslmode=bogus, give exit 1: psycopg 3.1 cuts libpq's message to the value.)
    import_or_skip("psycopg")  # no server needed, but the driver (the package build may lack it)
    uri = f"postgresql://u:{PASSWORD}@127.0.0.1:notaport/queuectl"
    line = assert_process_error(queuectl(uri, "status", check=False), 2)
    assert "not a valid PostgreSQL URI" in line and PASSWORD not in line, line


#: URIs of every shape a connection's description keeps: several hosts with a port each, one port for
#: all, ports for some, socket directories among the hosts, a service, target_session_attrs.
DESCRIBED = ["postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write", "postgresql://u@h1:5432,h2/db",
             "postgresql://u@h1,h2:5433/db", "postgresql://h1,h2/db?port=5432", "postgresql://u@h:5432/d",
             "postgresql:///queuectl?host=/run/postgresql", "postgresql:///q?host=/run/postgresql,h2&port=,5433",
             "postgresql://u@h/d?port=5432&service=x", "postgresql://?service=queuectl",
             "postgresql://u@h1:1,h2:2,h3:3/d?target_session_attrs=primary"]


@pytest.mark.parametrize("uri", DESCRIBED)
def test_a_connection_is_described_as_libpq_reads_its_uri_less_the_password(uri):
    pytest.importorskip("psycopg")
    from queuectl.store.postgres.store import _display, _parse

    def read(target: str) -> dict:  # libpq's reading, one port for every host spelled out (libpq's rule)
        params = _parse(target)
        hosts, ports = params.get("host", "").split(","), params.get("port", "").split(",")
        params["port"] = ",".join(ports * len(hosts) if len(ports) == 1 else ports)
        params.pop("password", None)
        return params

    with_password = uri.replace("postgresql://u@", "postgresql://u:QxPw9@")
    shown = _display(_parse(with_password))
    assert "QxPw9" not in shown
    assert read(shown) == read(with_password), shown


def test_several_hosts_with_read_write_reach_the_primary_past_a_dead_host_and_a_standby(db, pg_server):
    name = db.rsplit("/", 1)[1]
    enqueue_json = '{"id":"ha","command":"true"}'
    open_store(db).close()  # the schema, which the standby copies
    dead = free_port()
    standby = pg_server.standby("qstandby")  # asynchronous
    try:
        hosts = f"postgresql://postgres@127.0.0.1:{dead},127.0.0.1:{standby.port},127.0.0.1:{pg_server.port}/{name}"
        assert queuectl(hosts + "?target_session_attrs=read-write", "enqueue", enqueue_json).stdout == "ha\n"
        assert pg_server.sql("SELECT id FROM queuectl.jobs", dbname=name) == [("ha",)]
        # Without it, libpq takes the first server that answers: the standby, which refuses writes.
        line = assert_process_error(queuectl(hosts, "enqueue", '{"command":"true"}', check=False), 1)
        assert "read-only transaction" in line, line
    finally:
        standby.cleanup()
    assert pg_server.sql("SELECT slot_name FROM pg_replication_slots") == []  # the standby's slot went with it
    dead2 = free_port()
    uri = f"postgresql://postgres@127.0.0.1:{dead},127.0.0.1:{dead2}/{name}?target_session_attrs=read-write"
    line = assert_process_error(queuectl(uri, "status", check=False), 1)
    assert f"cannot connect to database {uri}: " in line, line


@pytest.mark.parametrize("target", ["postgresql:", f"POSTGRESQL://u:{PASSWORD}@h/q", "postgresql:/h/q",
                                    "postgresq://h/q", f"host=127.0.0.1 dbname=q password={PASSWORD}"])
def test_a_value_meant_for_postgresql_that_is_no_uri_makes_no_sqlite_file(target, tmp_path):
    r = subprocess.run([*QUEUECTL, "--db", target, "status"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60)
    line = assert_process_error(r, 2)
    assert "postgresql://user@host/dbname" in line and PASSWORD not in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_missing_database_given_by_the_environment_is_a_configuration_error(pg_server):
    env = {**os.environ, "QUEUECTL_DB": pg_server.uri("no_such_database")}
    r = subprocess.run([*QUEUECTL, "status"], capture_output=True, text=True, env=env, timeout=60)
    assert "does not exist" in assert_process_error(r, 1)


def test_the_password_never_appears_in_output_or_logs(password_uri, tmp_path):
    queuectl(password_uri, "config", "set", "heartbeat-interval", "0.2")
    queuectl(password_uri, "config", "set", "stale-after", "1")
    queuectl(password_uri, "enqueue", '{"id":"p","command":"exit 3","max_retries":0}')
    outputs = [queuectl(password_uri, "worker", "start", "--burst", "--verbose")]
    for args in (("status",), ("status", "--json"), ("list",), ("show", "p", "--json"), ("dlq", "list"),
                 ("metrics",), ("config", "list"), ("show", "nope")):
        outputs.append(queuectl(password_uri, *args, check=False))
    for r in outputs:
        assert PASSWORD not in r.stdout + r.stderr, r
    assert json.loads(outputs[2].stdout)["jobs"]["dead"] == 1


def test_without_psycopg_a_postgresql_uri_says_what_to_install(tmp_path, pg_server):
    blocker = tmp_path / "nopsycopg"
    blocker.mkdir()
    (blocker / "psycopg.py").write_text("raise ImportError('No module named psycopg')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([*QUEUECTL, "--db", pg_server.uri("x"), "status"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert "apt-get install python3-psycopg" in assert_process_error(r, 78)
    # SQLite needs no psycopg at all.
    r = subprocess.run([*QUEUECTL, "--db", str(tmp_path / "q.db"), "status"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr


# -- configuration, folded counters, connection timeouts ----------------------------------------------


def test_the_site_configuration_may_name_a_postgresql_database(db, tmp_path):
    conf = tmp_path / "queuectl.conf"
    conf.write_text(f"[queuectl]\ndb = {db}\n\n[defaults]\nmax-retries = 7\n")
    env = {**os.environ, "QUEUECTL_CONFIG": str(conf)}
    env.pop("QUEUECTL_DB", None)
    r = subprocess.run([*QUEUECTL, "enqueue", '{"id":"c","command":"true"}'], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == "c\n", r.stderr
    r = subprocess.run([*QUEUECTL, "config", "get", "max-retries"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.stdout == "7\n", r
    with open_store(db) as s:
        assert s.get_job("c").state == JobState.PENDING
    conf.write_text("[queuectl]\ndb = mysql://u@h/q\n")
    r = subprocess.run([*QUEUECTL, "status"], capture_output=True, text=True, env=env, timeout=60)
    assert "db must be an absolute path or a postgresql:// URI" in assert_process_error(r, 78)


def test_a_burst_drain_leaves_its_counters_folded(db, run_cli, store):
    lines = "\n".join(json.dumps({"id": f"b{i}", "command": "true"}) for i in range(30))
    assert run_cli("enqueue", "--file", "-", input=lines).exit_code == 0
    assert queuectl(db, "worker", "start", "--burst", "--count", "2").returncode == 0
    assert store.c.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0] == 0
    assert store.c.execute("SELECT count(*) FROM job_run_deltas").fetchone()[0] == 0
    assert store.counts() == {"default": {"completed": 30}} and store.run_counts() == {"default": {"completed": 30}}


def test_connections_give_up_on_a_vanished_server_within_seconds_unless_the_uri_says_otherwise(db):
    # The kernel alone would wait about 15 minutes for a host that lost power (TCP retransmissions).
    with open_store(db) as s:
        params = s._connect().info.get_parameters()
        assert (params.get("tcp_user_timeout"), params.get("keepalives_idle")) == ("10000", "5"), params
    own = db + ("&" if "?" in db else "?") + "tcp_user_timeout=60000"
    with open_store(own) as s:
        assert s._connect().info.get_parameters()["tcp_user_timeout"] == "60000"


# What the engine keeps that the interface does not show, written once in the SQLite store's tests: run here too.
test_purge_deletes_the_output_of_the_jobs_it_deletes = (
    test_store_sqlite.test_purge_deletes_the_output_of_the_jobs_it_deletes)
test_expire_forgets_exactly_the_claims_whose_age_is_past_the_window = (
    test_store_sqlite.test_expire_forgets_exactly_the_claims_whose_age_is_past_the_window)


def _limited_claims(db: str) -> int:
    with open_store(db) as s:
        return s.c.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'queuectl'::regnamespace"
                           " AND proname = 'claim_limited'").fetchone()[0]


def test_a_migrated_database_holds_no_second_limited_claim(db, monkeypatch):
    """The limited claim is queuectl.store.limits.claim_within_limits on both engines: the plpgsql function of the
    same rules, which schema versions 6 to 13 held, is dropped by the step after them, with the signature it was
    released with."""
    import queuectl.store.postgres.store as pg

    monkeypatch.setattr(pg, "SCHEMA_VERSION", 13)  # a database as version 13 left it, the function in it
    open_store(db).close()
    behind_queuectls_back(db, "CREATE FUNCTION queuectl.claim_limited(p_worker bigint, p_queues text[], p_claim integer,"
                              " p_free integer, p_now double precision, p_domain text, p_mono double precision,"
                              " p_slack double precision, p_leaving text[]) RETURNS SETOF queuectl.jobs"
                              " LANGUAGE sql AS 'SELECT * FROM queuectl.jobs WHERE false'")
    assert _limited_claims(db) == 1
    monkeypatch.setattr(pg, "SCHEMA_VERSION", SCHEMA_VERSION)
    assert _limited_claims(db) == 0  # opened by this queuectl: migrated
    with open_store(db) as s:
        assert s.c.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
