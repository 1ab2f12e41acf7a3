"""queuectl behind a real PgBouncer in transaction pooling, as Debian installs it (tests/support/pgbouncer.py).

Every command works through the pooler (no startup options, no search_path, no prepared
statement or lock that outlives a transaction); a worker given the pooled URI refuses in one
line, and one given a direct URI of its own (worker-db, QUEUECTL_WORKER_DB) drains what the
commands enqueued through the pooler.
"""

from __future__ import annotations

import json
import os
import subprocess
from urllib.parse import unquote

import pytest

from support.cli import QUEUECTL, assert_process_error, queuectl
from support.suite import require
from support.pgbouncer import PgBouncer
from queuectl.store import open_store
from queuectl.store.postgres.store import qualify
from queuectl.store.postgres.schema import SCHEMA, TABLES



def tables_by_schema(pg_server, db_uri: str) -> dict[str, set[str]]:
    rows = pg_server.sql("SELECT schemaname, tablename FROM pg_tables WHERE schemaname IN ('public', %s)",
                         dbname=unquote(db_uri.rsplit("/", 1)[1]), params=(SCHEMA,))
    found: dict[str, set[str]] = {}
    for schema, table in rows:
        found.setdefault(schema, set()).add(table)
    return found


def test_every_command_works_through_the_pooler_on_a_fresh_database(pooled, pg_uri, pg_server, tmp_path):
    q = lambda *args, **kw: queuectl(pooled, *args, **kw)  # noqa: E731
    assert "pending" in q("status").stdout  # the first command creates the schema, through the pooler
    assert tables_by_schema(pg_server, pg_uri) == {SCHEMA: set(TABLES)}
    q("enqueue", json.dumps({"id": "ok", "command": "echo hi"}))
    q("enqueue", json.dumps({"id": "later", "command": "true", "run_at": "2999-01-01T00:00:00Z"}))
    jobs = "".join(json.dumps({"id": f"f{i}", "command": "exit 3", "max_retries": 0}) + "\n" for i in range(12))
    q("enqueue", "--file", "-", input=jobs)  # one transaction, more statements than psycopg prepares after
    for _ in range(7):  # the same statements again and again, as a script polling the queue does
        q("show", "ok")
    q("config", "set", "backoff-base", "1")
    assert q("config", "get", "backoff-base").stdout.strip() == "1"
    assert "backoff-base" in q("config", "list").stdout
    q("pause", "default")
    assert "default" in json.loads(q("status", "--json").stdout)["paused"]
    q("resume", "default")
    assert json.loads(q("status", "--json").stdout)["paused"] == {}

    # The worker has a direct connection; it finishes the jobs the pooler's clients enqueued.
    queuectl(pg_uri, "worker", "start", "--burst", timeout=120)
    assert json.loads(q("show", "ok", "--json").stdout)["state"] == "completed"
    assert q("logs", "ok").stdout == "hi\n"
    dead = json.loads(q("dlq", "list", "--json").stdout)
    assert sorted(j["id"] for j in dead) == sorted(f"f{i}" for i in range(12))
    assert len(json.loads(q("list", "--state", "dead", "--json").stdout)) == 12
    q("dlq", "retry", "f0")
    q("cancel", "f0")
    q("retry", "f0")
    assert json.loads(q("show", "f0", "--json").stdout)["state"] == "pending"
    q("cancel", "later")
    metrics = q("metrics").stdout
    assert 'queuectl_jobs{queue="default",state="dead"} 11' in metrics, metrics
    q("purge", "--state", "dead", "--older-than", "0")
    assert json.loads(q("list", "--state", "dead", "--json").stdout) == []
    assert "public" not in tables_by_schema(pg_server, pg_uri)


def test_a_schema_made_over_a_direct_connection_serves_commands_through_the_pooler(pooled, pg_uri):
    open_store(pg_uri).close()
    queuectl(pooled, "enqueue", json.dumps({"id": "a", "command": "true"}))
    assert json.loads(queuectl(pooled, "show", "a", "--json").stdout)["state"] == "pending"


def test_a_worker_given_the_pooled_uri_refuses_in_one_line_and_registers_nothing(pooled, pg_uri):
    queuectl(pooled, "enqueue", json.dumps({"id": "a", "command": "true"}))
    r = queuectl(pooled, "worker", "start", "--burst", check=False, timeout=60)
    line = assert_process_error(r, 78)
    assert "pooler" in line and "worker-db" in line and "QUEUECTL_WORKER_DB" in line, line
    with open_store(pg_uri) as s:
        assert s.workers() == []
        assert s.get_job("a").state == "pending"


def test_a_pooler_in_session_mode_carries_a_worker(pg_server, pg_uri):
    require(PgBouncer.missing(), "pgbouncer")
    session = PgBouncer(pg_server, pool_mode="session").start()
    try:
        uri = session.uri(unquote(pg_uri.rsplit("/", 1)[1]))
        queuectl(uri, "enqueue", json.dumps({"id": "a", "command": "true"}))
        queuectl(uri, "worker", "start", "--burst", timeout=60)
        assert json.loads(queuectl(uri, "show", "a", "--json").stdout)["state"] == "completed"
    finally:
        session.stop()


@pytest.mark.parametrize("where", ["config file", "environment"])
def test_workers_take_a_direct_uri_of_their_own_while_commands_use_the_pooler(where, pooled, pg_uri, tmp_path):
    conf = tmp_path / "queuectl.conf"
    env = {**os.environ, "QUEUECTL_CONFIG": str(conf)}
    env.pop("QUEUECTL_DB", None)
    if where == "config file":
        conf.write_text(f"[queuectl]\ndb = {pooled}\nworker-db = {pg_uri}\n")
    else:
        conf.write_text(f"[queuectl]\ndb = {pooled}\n")
        env["QUEUECTL_WORKER_DB"] = pg_uri
    run = lambda *args, **kw: subprocess.run(  # noqa: E731
        [*QUEUECTL, *args], capture_output=True, text=True, env=env, timeout=120, **kw)
    r = run("enqueue", json.dumps({"id": "a", "command": "true"}))
    assert r.returncode == 0, r.stderr
    r = run("worker", "start", "--burst")
    assert r.returncode == 0, r.stderr
    r = run("show", "a", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "completed", r.stderr


def test_an_empty_queuectl_worker_db_counts_as_unset(pg_uri, tmp_path):
    queuectl(pg_uri, "enqueue", json.dumps({"id": "a", "command": "true"}))
    env = {**os.environ, "QUEUECTL_WORKER_DB": "", "QUEUECTL_DB": pg_uri, "QUEUECTL_CONFIG": ""}
    r = subprocess.run([*QUEUECTL, "worker", "start", "--burst"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    with open_store(pg_uri) as s:
        assert s.get_job("a").state == "completed"


def test_a_bad_worker_db_in_the_config_file_is_a_configuration_error(tmp_path):
    conf = tmp_path / "queuectl.conf"
    conf.write_text("[queuectl]\nworker-db = relative/path.db\n")
    env = {**os.environ, "QUEUECTL_CONFIG": str(conf)}
    env.pop("QUEUECTL_DB", None)
    r = subprocess.run([*QUEUECTL, "status"], capture_output=True, text=True, env=env,
                                     timeout=60)
    assert "worker-db must be an absolute path" in assert_process_error(r, 78)


def test_tables_lists_every_table_the_migrations_make(pg_uri, pg_server):
    open_store(pg_uri).close()
    made = tables_by_schema(pg_server, pg_uri)[SCHEMA]
    assert made == set(TABLES), f"postgres_schema.TABLES lacks {sorted(made - set(TABLES))}"


def test_qualify_names_tables_where_a_query_names_them_and_leaves_columns_alone():
    sql = ("SELECT queues, name FROM workers w JOIN jobs j ON j.worker_id = w.id"
           " WHERE queue NOT IN (SELECT name FROM queues) AND id = ?")
    assert qualify(sql) == ("SELECT queues, name FROM queuectl.workers w JOIN queuectl.jobs j ON j.worker_id = w.id"
                            " WHERE queue NOT IN (SELECT name FROM queuectl.queues) AND id = %s")
    assert qualify("INSERT INTO job_counts (queue) VALUES (?)") == "INSERT INTO queuectl.job_counts (queue) VALUES (%s)"
    assert qualify("UPDATE jobs SET x = 1") == "UPDATE queuectl.jobs SET x = 1"
    assert qualify("VACUUM ANALYZE jobs") == "VACUUM ANALYZE queuectl.jobs"
    assert qualify("SELECT 1 FROM queuectl.jobs") == "SELECT 1 FROM queuectl.jobs"


def test_commands_prepare_no_statements_and_workers_may(pg_uri):
    with open_store(pg_uri) as command, open_store(pg_uri, session=True) as worker:
        assert command._connection().prepare_threshold is None
        assert worker._connection().prepare_threshold is not None

