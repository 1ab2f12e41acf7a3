"""queuectl.api, called as a library (as the terminal and web views will): each operation's result,
and each domain error with its exit code and the database left as it was."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from support.jobs import enqueue_specs
from queuectl.api import config, jobs, limits, ops, schedules, waiting
from queuectl.api.database import CONFIG, DEFAULT, ENVIRONMENT, OPTION, Database, open_database
from queuectl.api.outage import Patience
from queuectl.api.starting import worker_for, worker_store
from queuectl.api.status import status, write_metrics
from queuectl.cli import exit_code_for
from queuectl.domain.errors import (Conflict, DatabaseUnavailable, Interrupted, InvalidConfig, InvalidInput, NotFound,
                             PermissionDenied, QueuectlError)
from queuectl.domain.models import JobState
from queuectl.store.jobfilter import JobFilter


def dump(path: str) -> tuple:
    """Everything in the SQLite database: the header pragmas and every row."""
    con = sqlite3.connect(path)
    try:
        return (con.execute("PRAGMA user_version").fetchone(), tuple(con.iterdump()))
    finally:
        con.close()


def patient() -> Patience:
    return Patience(lambda line: None, limit=0)


def refused(store, db: str, error: type[QueuectlError], code: int, call, *fragments: str) -> QueuectlError:
    """Call `call()`: it must raise `error`, mapped to exit `code`, and leave the database as it was."""
    before = dump(db)
    with pytest.raises(error) as caught:
        call()
    assert exit_code_for(caught.value) == code
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))
    assert dump(db) == before
    return caught.value


# -- exit codes: one place ---------------------------------------------------------------------------------


@pytest.mark.parametrize("error, code", [(InvalidConfig, 78), (Interrupted, 130), (InvalidInput, 2),
                                         (PermissionDenied, 2), (NotFound, 1), (Conflict, 1),
                                         (DatabaseUnavailable, 1), (QueuectlError, 1)])
def test_each_domain_error_has_its_exit_code(error, code):
    assert exit_code_for(error("x")) == code


# -- the database in force ---------------------------------------------------------------------------------


def test_the_database_is_the_option_then_the_configuration_file_then_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("QUEUECTL_CONFIG", "")
    given = Database(str(tmp_path / "given.db"))
    assert (given.db_path(), given.db_source) == (str(tmp_path / "given.db"), OPTION)
    default = Database(None)
    assert default.db_path() == str(tmp_path / "data" / "queuectl" / "queuectl.db") and default.db_source == DEFAULT
    default.store()  # the default directory is made on first use
    assert (tmp_path / "data" / "queuectl" / "queuectl.db").exists()
    default.close()
    conf = tmp_path / "queuectl.conf"
    conf.write_text(f"[queuectl]\ndb = {tmp_path / 'site.db'}\nworker-db = {tmp_path / 'workers.db'}\n")
    monkeypatch.setenv("QUEUECTL_CONFIG", str(conf))
    site = Database(None)
    assert (site.db_path(), site.db_source) == (str(tmp_path / "site.db"), CONFIG)
    site.for_worker()
    assert site.db_path() == str(tmp_path / "workers.db")
    monkeypatch.setenv("QUEUECTL_WORKER_DB", str(tmp_path / "env-workers.db"))
    from_env = Database(str(tmp_path / "env.db"), ENVIRONMENT)
    from_env.for_worker()
    assert from_env.db_path() == str(tmp_path / "env-workers.db")
    pinned = Database(str(tmp_path / "given.db"), OPTION)
    pinned.for_worker()  # --db on the command line wins over every other
    assert pinned.db_path() == str(tmp_path / "given.db")


@pytest.mark.parametrize("source, error, code", [(OPTION, InvalidInput, 2), (ENVIRONMENT, InvalidConfig, 78)])
def test_a_database_that_cannot_be_used_is_bad_input_or_bad_configuration_by_its_source(source, error, code):
    with pytest.raises(error) as caught:
        Database("postgres:/typo", source).store()
    assert exit_code_for(caught.value) == code
    assert ("QUEUECTL_DB" in str(caught.value)) == (source == ENVIRONMENT)


def test_open_database_takes_queuectl_db_when_given_none(tmp_path, monkeypatch):
    monkeypatch.setenv("QUEUECTL_DB", str(tmp_path / "env.db"))
    store = open_database()
    try:
        enqueue_specs(store, '{"command":"true"}')
    finally:
        store.close()
    assert (tmp_path / "env.db").exists()


def test_a_worker_does_not_wait_for_its_database_outside_systemd(tmp_path, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    said = []
    database = Database("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    with pytest.raises(QueuectlError):  # DatabaseUnavailable, or InvalidConfig without psycopg: at once
        worker_store(database, wait=True, say=said.append, sleep=lambda s: pytest.fail("waited"))
    assert said == []


# -- enqueue, wait -----------------------------------------------------------------------------------------


def test_enqueue_returns_what_it_did_with_each_job(store):
    first = jobs.enqueue(store, [jobs.parse_one('{"id":"a","command":"true","key":"k"}')])
    again = jobs.enqueue(store, [jobs.parse_one('{"command":"true","key":"k"}')])
    assert first[0].id == "a" and first[0].held is None
    assert again[0].id == "a" and again[0].held == JobState.PENDING


def test_a_file_of_jobs_names_the_bad_line_and_enqueues_nothing(store, db):
    enqueue_specs(store, '{"id":"taken","command":"true"}')
    lines = [b'{"command":"true"}\n', b"\n", b'{"command":"true","priority":"high"}\n']
    refused(store, db, InvalidInput, 2, lambda: jobs.parse_jobs(lines), "line 3:", "nothing was enqueued")
    refused(store, db, InvalidInput, 2, lambda: jobs.parse_jobs([b"\xff\n"]), "line 1: not UTF-8")
    refused(store, db, InvalidInput, 2, lambda: jobs.parse_jobs([b"\n"]), "no jobs")
    parsed, numbers = jobs.parse_jobs([b'{"command":"true"}\n', b"\n", b'{"id":"taken","command":"true"}\n'])
    assert numbers == [1, 3]
    refused(store, db, Conflict, 1, lambda: jobs.enqueue(store, parsed, numbers), "line 3:", "nothing was enqueued")
    after = jobs.parse_jobs([b'{"command":"true","after":"nobody"}\n'])
    refused(store, db, NotFound, 1, lambda: jobs.enqueue(store, *after), "line 1:", "nothing was enqueued")


def test_wait_reports_unknown_ids_and_waits_for_nothing_then(store):
    known = enqueue_specs(store, '{"command":"true"}')
    waited = waiting.wait(store, [*known, "nobody"], patient(), timeout=5)
    assert waited.unknown == ["nobody"] and waited.jobs == {} and waited.late == []


def test_wait_gives_the_jobs_not_ended_by_the_timeout(store):
    ids = enqueue_specs(store, '{"command":"true"}')
    waited = waiting.wait(store, ids, patient(), timeout=0.05)
    assert waited.late == ids and waited.unknown == [] and list(waited.jobs) == ids


def test_wait_status_is_that_of_the_first_job_that_did_not_complete(store):
    ids = enqueue_specs(store, '{"id":"a","command":"true"}', '{"id":"b","command":"true"}')
    ops.cancel(store, patient(), ["b"])
    ops.cancel(store, patient(), ["a"])
    assert waiting.wait_enqueued(store, [*ids, "a"], patient()).status == 1
    assert [j.state for j in waiting.wait(store, ids, patient()).failed] == [JobState.CANCELLED] * 2


# -- cancel, retry, pause, purge --------------------------------------------------------------------------


def test_cancel_takes_ids_or_a_choice_not_both_nor_neither(store, db):
    enqueue_specs(store, '{"id":"a","command":"true","queue":"q"}')
    refused(store, db, InvalidInput, 2, lambda: ops.cancel(store, patient(), ["a"], queue="q"), "not both")
    refused(store, db, InvalidInput, 2, lambda: ops.cancel(store, patient()), "give the ids")
    refused(store, db, InvalidInput, 2, lambda: ops.cancel(store, patient(), queue="bad name"))


def test_cancel_reports_each_job_and_the_errors_beside_them(store):
    enqueue_specs(store, '{"id":"a","command":"true"}', '{"id":"b","command":"true","after":"a"}')
    report = ops.cancel(store, patient(), ["a", "nobody"])
    assert [(c.id, c.was, c.state, c.error is None) for c in report] == [
        ("a", "pending", "cancelled", True), ("nobody", None, None, False)]
    assert report[0].description == "cancelled" and report[0].to_dict()["worker"] is None
    assert store.get_job("b").state == JobState.CANCELLED  # its dependant with it
    assert [c.id for c in ops.cancel(store, patient(), states=[JobState.PENDING])] == []


def test_cancel_by_queue_and_states_is_the_bulk_cancel_newest_first_in_batches_reported_oldest_first(store):
    enqueue_specs(store, '{"id":"a","command":"true","queue":"q"}', '{"id":"b","command":"true","queue":"q","after":"a"}',
                  '{"id":"c","command":"true","queue":"q"}', '{"id":"d","command":"true","queue":"other"}')
    walk = ops.cancel_walk(store, [JobFilter(state=JobState.PENDING, queue="q"),
                                   JobFilter(state=JobState.BLOCKED, queue="q")], batch=1)
    # newest first across the states: the dependant b before a, whose cancel would have taken it along unreported
    assert [(job.id, r.result) for job, r in walk] == [("c", "cancelled"), ("b", "cancelled"), ("a", "cancelled")]
    assert store.get_job("d").state == JobState.PENDING
    enqueue_specs(store, '{"id":"e","command":"true","queue":"r"}', '{"id":"f","command":"true","queue":"r","after":"e"}',
                  '{"id":"g","command":"true","queue":"r"}')
    assert [(c.id, c.was, c.state) for c in ops.cancel(store, patient(), queue="r")] == [
        ("e", "pending", "cancelled"), ("f", "blocked", "cancelled"), ("g", "pending", "cancelled")]


def test_a_worker_is_made_with_its_name_and_queues_checked_before_its_store_opens(store):
    opened = []

    def store_for():
        opened.append(True)
        return store

    w = worker_for(store_for, name="w1", slots=2, queues=["b,a", "", "b", "c"], burst=True)
    assert (w.name, w.slots, w.queues, w.burst, opened) == ("w1", 2, ("b", "a", "c"), True, [True])
    w.runner.close()
    default = worker_for(lambda: store)
    assert default.name.rsplit("-", 1)[1] == str(os.getpid()) and default.queues == ()  # HOST-PID, every queue
    default.runner.close()
    opened.clear()
    for field, given, error, words in [("name", {"name": "a b"}, InvalidInput, "worker name must be"),
                                       ("name", {"name": ""}, InvalidInput, "worker name must be"),
                                       ("queues", {"queues": ["ok", "bad/q"]}, InvalidInput, "queue names are")]:
        with pytest.raises(error, match=words):
            worker_for(store_for, **given)
        with pytest.raises(InvalidConfig, match=f"QUEUECTL_WORKER_{field.upper()}: {words}"):  # a unit's: exit 78
            worker_for(store_for, **given, from_environment=[field])
    assert opened == []  # refused before the database was opened


def test_retry_refuses_a_job_that_is_not_dead_or_cancelled(store, db):
    enqueue_specs(store, '{"id":"a","command":"true"}')
    refused(store, db, Conflict, 1, lambda: ops.retry(store, ["a"]), "'a'")
    refused(store, db, NotFound, 1, lambda: ops.retry(store, ["nobody"]))
    refused(store, db, Conflict, 1, lambda: ops.dlq_retry(store, ["a"]))
    ops.cancel(store, patient(), ["a"])
    assert ops.retry(store, ["a"]) == [JobState.PENDING]


def test_pause_and_resume_say_which_queues_changed(store, db):
    assert ops.set_paused(store, ["q", "r", "q"], True) == [("q", True), ("r", True)]
    assert ops.set_paused(store, ["q"], True) == [("q", False)]
    assert ops.set_paused(store, ["q"], False) == [("q", True)]
    refused(store, db, InvalidInput, 2, lambda: ops.set_paused(store, ["bad name"], True))


def test_purge_deletes_finished_jobs_by_age_and_refuses_what_would_delete_nothing(store, db):
    enqueue_specs(store, '{"id":"a","command":"true"}', '{"id":"b","command":"true"}')
    ops.cancel(store, patient(), ["a"])
    refused(store, db, InvalidInput, 2, lambda: ops.purge(store, older_than="forever"), "forever")
    refused(store, db, InvalidInput, 2, lambda: ops.purge(store, older_than="soon"))
    refused(store, db, InvalidInput, 2, lambda: ops.purge(store, ["pending"]), "pending")
    assert ops.purge(store, dry_run=True).removed == 0  # keep-cancelled: a day
    assert ops.purge(store, ["cancelled"], "0", dry_run=True) == ops.Purged(1, dry_run=True)
    done = ops.purge(store, older_than="0")
    assert done.removed == 1 and not done.dry_run
    assert [j.id for j in store.list_jobs(None, None, 10)] == ["b"]


# -- schedules, limits, settings --------------------------------------------------------------------------


def test_a_replaced_cron_schedule_keeps_its_zone_unless_one_is_given(store):
    first = schedules.add(store, schedules.draft("n", '{"command":"true"}', cron="0 3 * * *", zone="Asia/Tokyo"))
    assert first.rule.zone == "Asia/Tokyo"
    kept = schedules.add(store, schedules.draft("n", '{"command":"true"}', cron="0 4 * * *"), replace=True)
    assert kept.rule.zone == "Asia/Tokyo" and kept.schedule.zone == "Asia/Tokyo"
    other = schedules.add(store, schedules.draft("n", '{"command":"true"}', cron="0 4 * * *", zone="UTC"),
                          replace=True)
    assert other.rule.zone == "UTC"
    assert [s.name for s in schedules.list_schedules(store)] == ["n"]


def test_schedule_errors_leave_the_schedules_as_they_were(store, db):
    schedules.add(store, schedules.draft("n", '{"command":"true"}', every="5m"))
    refused(store, db, InvalidInput, 2, lambda: schedules.draft("m", '{"command":"true"}', every="5m", zone="UTC"),
            "--tz applies to --cron only")
    refused(store, db, InvalidInput, 2, lambda: schedules.draft("m", '{"command":"true"}', cron="61 * * * *"))
    refused(store, db, InvalidInput, 2, lambda: schedules.draft("m", '{"id":"x","command":"true"}', every="5m"))
    taken = schedules.draft("n", '{"command":"true"}', every="1m")
    refused(store, db, Conflict, 1, lambda: schedules.add(store, taken))
    assert schedules.set_paused(store, ["n", "nobody"], True) == [("n", True), ("nobody", None)]
    assert schedules.remove(store, ["n", "nobody", "n"]) == [("n", True), ("nobody", None)]


def test_limits_are_checked_before_the_store_and_kept_in_it(store, db):
    refused(store, db, InvalidInput, 2, lambda: limits.check(0), "")
    refused(store, db, InvalidInput, 2, lambda: limits.check(None, "30"), "'30'")
    refused(store, db, InvalidInput, 2, lambda: limits.check(2, None, clear=True), "--clear alone")
    refused(store, db, InvalidInput, 2, lambda: limits.set_limit(store, "bad name", 2))
    assert limits.parse_rate("30/1m") == (30, 60.0)
    kept = limits.set_limit(store, "build", concurrency=2)
    kept = limits.set_limit(store, "build", rate="5/2s")
    assert (kept.concurrency, kept.rate_count, kept.rate_window) == (2, 5, 2.0)
    assert [q.queue for q in limits.limits(store)] == ["build"] and limits.limits(store, "other") == []
    assert limits.set_limit(store, "build", clear=True).text == "-"


def test_settings_by_either_spelling_and_bad_values_refused(store, db):
    assert config.set_(store, "max_retries", "5") == ("max-retries", 5)
    assert config.get(store, "MAX-RETRIES") == ("max-retries", 5)
    assert config.all_settings(store)["max-retries"] == 5
    refused(store, db, InvalidInput, 2, lambda: config.get(store, "nothing"))
    refused(store, db, InvalidInput, 2, lambda: config.set_(store, "max-retries", "-1"))


# -- status, metrics ---------------------------------------------------------------------------------------


def test_status_reports_counts_keys_and_retention(store):
    enqueue_specs(store, '{"id":"a","command":"true","key":"k","queue":"q"}')
    report = status(store)
    d = report.to_dict()
    assert d["jobs"]["pending"] == 1 and d["queues"]["q"]["pending"] == 1
    assert d["keys"] == [{"key": "k", "id": "a", "state": "pending"}] and d["keys_held"] == 1
    assert d["retention"] == {"completed": 86400.0, "cancelled": 86400.0, "dead": 7 * 86400.0, "history": 14 * 86400.0}


def test_the_metrics_file_is_written_whole_and_readable_by_all(store, tmp_path):
    enqueue_specs(store, '{"command":"true"}')
    old = os.umask(0o077)
    try:
        target = write_metrics(store, str(tmp_path / "queuectl.prom"))
    finally:
        os.umask(old)
    assert target == str(tmp_path / "queuectl.prom")
    assert 'queuectl_jobs{queue="default",state="pending"} 1' in (tmp_path / "queuectl.prom").read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize("path, fragment", [("", "--output is empty"), ("/nonexistent/dir/m.prom", "does not exist")])
def test_a_metrics_file_that_cannot_be_written_is_bad_input(store, db, path, fragment):
    refused(store, db, InvalidInput, 2, lambda: write_metrics(store, path), fragment)


def test_a_metrics_file_whose_write_fails_leaves_no_temporary_file(store, tmp_path):
    (tmp_path / "m.prom").mkdir()  # a directory in the way: the rename fails
    with pytest.raises(InvalidInput, match="cannot write"):
        write_metrics(store, str(tmp_path / "m.prom"))
    assert sorted(os.listdir(tmp_path)) == ["m.prom", "queue.db", *sorted(
        n for n in os.listdir(tmp_path) if n.startswith("queue.db-"))]


# -- list, show --------------------------------------------------------------------------------------------


def test_a_listing_gives_the_total_when_its_limit_cuts_it_short(store, db):
    enqueue_specs(store, '{"id":"a","command":"true","queue":"q"}', '{"id":"b","command":"true","queue":"q"}',
        '{"id":"c","command":"true"}')
    first, total = jobs.list_jobs(store, None, "q", 1)
    assert [j.id for j in first] == ["b"] and total == 2
    listed, total = jobs.list_jobs(store, "pending", None, 10)
    assert [j.id for j in listed] == ["c", "b", "a"] and total == 3
    refused(store, db, InvalidInput, 2, lambda: jobs.list_jobs(store, "sleeping"), "sleeping")
    refused(store, db, InvalidInput, 2, lambda: jobs.list_jobs(store, None, "bad name"))
    assert jobs.show(store, "a").id == "a"
    refused(store, db, NotFound, 1, lambda: jobs.show(store, "nobody"), "nobody")


def test_a_worker_under_systemd_waits_for_its_postgresql_server_saying_so(tmp_path, monkeypatch):
    import socket

    pytest.importorskip("psycopg")
    pytest.importorskip("sdnotify")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "notify"))
    listener.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    said, slept = [], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 6:
            raise Interrupted("enough")

    try:
        with pytest.raises(Interrupted):
            worker_store(Database("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"),
                         wait=True, say=said.append, sleep=sleep)
        assert slept == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0]  # doubling up to CONNECT_RETRY_MAX
        assert len(said) == 1 and said[0].endswith("; waiting for it")  # once while the reason stays the same
        assert listener.recv(4096).startswith(b"STATUS=waiting for the database: ")
    finally:
        listener.close()


def test_the_help_of_waiting_commands_gives_the_outage_limit_from_its_one_home():
    from queuectl.api.outage import LIMIT, LIMIT_ENV
    from queuectl.cli.enqueue import enqueue
    from queuectl.cli.waiting import logs, wait

    for command in (enqueue, logs, wait):
        assert f"{LIMIT / 60:g} minutes ({LIMIT_ENV})" in command.help and "OUTAGE_LIMIT" not in command.help.replace(
            LIMIT_ENV, "")
