"""A job's attempts that ended without completing (job_attempts, kept by a trigger), on SQLite and PostgreSQL through
the interface: every path that ends an attempt records it once (the exchange, sent again too; recovery; a cancel
of a running job; a forced stop's cancel), none that does not (a completion, a requeue, a release, a cancel before
the start, a dependency's cascade); deleted with their job by retention; an existing database upgraded."""

import pytest

from queuectl.api.jobs import attempts
from queuectl.domain.clock import Instant
from queuectl.domain.errors import NotFound
from queuectl.domain.models import JobState
from queuectl.store import open_store
from queuectl.store.request import Exchange, Outcome
from queuectl.store.shared_schema import RECOVERED
from queuectl.worker.duties.retention import Retention
from support.worker_steps import NOW, add, bad, claim, finish, ok, register, requeue, start
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES

FAILED, DEAD, CANCELLED = JobState.FAILED, JobState.DEAD, JobState.CANCELLED


def summary(store, job_id: str) -> list[tuple]:
    """(n, attempt, outcome, end_code, exit_code, error) of each of the job's ended attempts, oldest first."""
    return [(a.n, a.attempt, a.outcome, a.end_code, a.exit_code, a.error) for a in attempts(store, job_id)]


def run_once(store, w: int, job_id: str, outcome: Outcome, at: float, seconds: float = 2.0) -> JobState:
    """Claim job `job_id` (due by `at`), start it at `at` and end it `seconds` later as `outcome` says."""
    assert [j.id for j in claim(store, w, [], 1, at)] == [job_id]
    [state] = finish(store, w, [outcome._replace(ended_at=at + seconds)], at + seconds)
    return state


def test_a_job_that_fails_twice_then_completes_keeps_two_attempts(store):
    add(store, id="a", max_retries=3)
    w = register(store)
    assert run_once(store, w, "a", bad("a", 3), NOW, 1.5) == FAILED
    assert run_once(store, w, "a", bad("a", 4), NOW + 100) == FAILED
    assert run_once(store, w, "a", ok("a"), NOW + 1000) == JobState.COMPLETED
    assert summary(store, "a") == [(1, 1, FAILED, None, 3, "exit code 3"), (2, 2, FAILED, None, 4, "exit code 4")]
    first, second = attempts(store, "a")
    assert (first.started_at, first.finished_at, first.duration) == (NOW, NOW + 1.5, 1.5)
    assert (second.started_at, second.finished_at) == (NOW + 100, NOW + 102)
    assert first.to_dict() == {"n": 1, "attempt": 1, "outcome": "failed", "end_code": None, "exit_code": 3,
                               "error": "exit code 3", "started_at": "1970-01-12T13:46:40.000+00:00",
                               "finished_at": "1970-01-12T13:46:41.500+00:00", "duration": 1.5}
    job = store.get_job("a")  # the attempt that completed is the job's own record
    assert (job.attempts, job.exit_code, job.started_at) == (3, 0, NOW + 1000)


def test_a_job_completed_on_its_first_attempt_keeps_none(store):
    add(store, id="a")
    w = register(store)
    assert run_once(store, w, "a", ok("a"), NOW) == JobState.COMPLETED
    assert summary(store, "a") == []


def test_a_dead_job_keeps_all_its_attempts_and_a_retry_by_hand_numbers_them_again(store):
    add(store, id="d", max_retries=1)
    w = register(store)
    assert run_once(store, w, "d", bad("d", 1), NOW) == FAILED
    assert run_once(store, w, "d", Outcome("d", False, None, "timed out after 2 s"), NOW + 100) == DEAD
    assert summary(store, "d") == [(1, 1, FAILED, None, 1, "exit code 1"), (2, 2, DEAD, None, None, "timed out after 2 s")]
    store.retry(["d"], NOW + 200)
    assert len(attempts(store, "d")) == 2  # a retry by hand keeps them
    assert run_once(store, w, "d", bad("d", 9), NOW + 300) == FAILED
    assert summary(store, "d")[2] == (3, 1, FAILED, None, 9, "exit code 9")  # attempt 1 again, the third row


def test_an_end_recorded_with_its_start_and_an_exchange_sent_again_keep_one_attempt(store):
    add(store, id="a", max_retries=0)
    w = register(store)
    assert [j.id for j in store.exchange(w, Exchange(claim=1), [], NOW).jobs] == ["a"]
    end = Outcome("a", False, 2, "exit code 2", started_at=NOW + 1, ended_at=NOW + 3)
    assert finish(store, w, [end], NOW + 3) == [DEAD]  # started and ended between two exchanges
    assert finish(store, w, [end], NOW + 4) == [None]  # its reply lost, sent again: the job is no longer this worker's
    [a] = attempts(store, "a")
    assert (a.attempt, a.outcome, a.exit_code, a.started_at, a.finished_at) == (1, DEAD, 2, NOW + 1, NOW + 3)


def test_recovery_of_a_lost_worker_keeps_a_worker_lost_attempt(store):
    add(store, id="ran", max_retries=1)
    add(store, id="ahead", max_retries=2)  # claimed ahead, its start never recorded: it may have run
    add(store, id="last", max_retries=0)  # claimed for its last attempt, never started: it did not run
    lost = register(store, "lost", slots=3)
    assert {j.id for j in store.exchange(lost, Exchange(claim=3), [], NOW).jobs} == {"ran", "ahead", "last"}
    start(store, lost, ["ran"], NOW + 1)
    recovered = dict(store.recover(lost, store.worker_by_name("lost").seen, NOW + 10))
    assert recovered == {"ran": FAILED, "ahead": FAILED, "last": JobState.PENDING}
    assert summary(store, "ran") == [(1, 1, FAILED, RECOVERED, None, "worker lost")]
    [a] = attempts(store, "ran")
    assert (a.started_at, a.finished_at) == (NOW + 1, NOW + 10)
    [a] = attempts(store, "ahead")
    assert (a.attempt, a.end_code, a.error, a.duration) == (1, RECOVERED, "worker lost", 0.0)  # no start seen
    assert attempts(store, "last") == []


def test_a_cancel_of_a_running_job_keeps_one_and_of_a_waiting_job_none(store):
    add(store, id="run")
    add(store, id="lost")
    add(store, id="wait")
    add(store, id="child", after=["run"])
    w = register(store, slots=2)
    claim(store, w, [], 2, NOW)
    results = {r.job_id: r.result for r in store.cancel(["run", "lost", "wait"], NOW + 1)}
    assert results == {"run": "requested", "lost": "requested", "wait": "cancelled"}
    # Its worker stops it: the end lands as cancelled, its dependant cancelled by the cascade.
    assert finish(store, w, [Outcome("run", False, None, "killed by signal 15 (SIGTERM)")], NOW + 2) == [CANCELLED]
    assert summary(store, "run") == [(1, 1, CANCELLED, None, None, "killed by signal 15 (SIGTERM)")]
    assert store.get_job("child").state == CANCELLED and attempts(store, "child") == []
    assert attempts(store, "wait") == []
    # A cancel requested of a job whose worker is lost: recovery cancels it.
    store.recover(w, store.worker_by_name("w1").seen, NOW + 5)
    assert summary(store, "lost") == [(1, 1, CANCELLED, None, None, "cancelled; worker lost")]


def test_a_forced_stop_keeps_the_attempt_of_a_job_it_cancels_and_gives_back_the_others(store):
    add(store, id="again", max_retries=3)
    add(store, id="cancel", max_retries=3)
    w = register(store, slots=2)
    assert run_once(store, w, "again", bad("again", 5), NOW) == FAILED
    claim(store, w, [], 2, NOW + 100)
    store.cancel(["cancel"], NOW + 101)
    assert requeue(store, w, ["again", "cancel"], NOW + 102) == 2
    assert store.get_job("again").state == JobState.PENDING
    assert summary(store, "again") == [(1, 1, FAILED, None, 5, "exit code 5")]  # its second attempt given back
    job = store.get_job("cancel")
    assert (job.state, job.attempts, job.last_error) == (CANCELLED, 0, "cancelled")
    assert summary(store, "cancel") == [(1, 1, CANCELLED, None, None, "cancelled")]  # the run it stopped


def test_a_release_and_an_unknown_job(store):
    add(store, id="a")
    w = register(store)
    store.exchange(w, Exchange(claim=1), [], NOW)
    store.exchange(w, Exchange(release=["a"]), [], NOW + 1)  # given back unstarted: no attempt ran
    assert store.get_job("a").state == JobState.PENDING and attempts(store, "a") == []
    with pytest.raises(NotFound, match="no job with id 'nope'"):
        attempts(store, "nope")


def test_the_newest_100_are_listed_and_n_says_how_many_came_before(store):
    add(store, id="many", max_retries=200)
    w = register(store)
    for i in range(103):
        run_once(store, w, "many", bad("many", i % 256), NOW + 4000 * i, 1)  # each due: backoff-max is 1 h
    listed = attempts(store, "many")
    assert [a.n for a in listed] == list(range(4, 104)) and listed[-1].attempt == 103
    assert [a.n for a in store.job_attempts("many", 2)] == [102, 103]


def test_retention_deletes_a_jobs_attempts_with_it(store):
    add(store, id="kept", max_retries=0)
    add(store, id="old", max_retries=0, priority=1)  # the newest job: SQLite gives its seq to the next job added
    w = register(store)
    run_once(store, w, "old", bad("old"), NOW)
    run_once(store, w, "kept", bad("kept"), NOW + 9000)
    Retention(store, lambda: w, lambda: {**store.settings(), "keep-dead": 1000.0},
              lambda: Instant(NOW + 9100, 100.0, "boot-a")).run(100.0)
    with pytest.raises(NotFound):
        attempts(store, "old")
    assert len(attempts(store, "kept")) == 1
    add(store, id="new")
    assert attempts(store, "new") == []  # no row of the deleted job passes for the new one's (SQLite reuses its seq)


def test_an_existing_database_is_upgraded_with_the_attempts_table(db, monkeypatch):
    import queuectl.store.postgres.store as pg
    import queuectl.store.sqlite.store as lite

    engine = lite if "://" not in db else pg
    current = engine.SCHEMA_VERSION
    step = min(n for n in engine.MIGRATIONS if "CREATE TABLE job_attempts" in engine.MIGRATIONS[n])
    monkeypatch.setattr(engine, "SCHEMA_VERSION", step - 1)  # the schema before the attempts
    with open_store(db) as old:
        add(old, id="a", max_retries=3)
        add(old, id="done")
        w = register(old)
        run_once(old, w, "a", bad("a", 3), NOW)
        run_once(old, w, "done", ok("done"), NOW + 100)
    monkeypatch.setattr(engine, "SCHEMA_VERSION", current)
    with open_store(db) as new:
        assert attempts(new, "a") == [] and attempts(new, "done") == []  # no attempt was kept before
        assert (new.get_job("a").state, new.get_job("done").state) == (FAILED, JobState.COMPLETED)
        assert run_once(new, w, "a", bad("a", 4), NOW + 1000) == FAILED
        assert summary(new, "a") == [(1, 2, FAILED, None, 4, "exit code 4")]
