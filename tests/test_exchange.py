"""The worker's exchange with the store (queuectl.store.base.Exchange), on SQLite and PostgreSQL:
what a claim counts, a start recorded with its end, jobs given back unstarted, recovery of jobs
claimed and not started, and that one exchange is one transaction."""

import pytest

from queuectl.models import JobState
from queuectl.store import Exchange, Outcome, Running, WorkerGone
from queuectl.store.sql import LOST_UNSTARTED
from test_store import NOW, add, register


@pytest.fixture
def db(backend_db):
    return backend_db


def runs(store) -> dict:
    return store.run_counts().get("default", {})


def test_a_claim_counts_no_attempt_until_the_start_is_recorded(store):
    add(store, id="a")
    w = register(store)
    _, [job] = store.exchange(w, Exchange(claim=5), [], NOW)
    got = store.get_job("a")
    assert (job.attempts, got.state, got.attempts, got.started_at, got.worker_id) == (
        0, JobState.PROCESSING, 0, None, w)
    store.exchange(w, Exchange(running=[Running("a", NOW + 1)]), [], NOW + 1)
    got = store.get_job("a")
    assert (got.attempts, got.started_at) == (1, NOW + 1)
    store.exchange(w, Exchange(running=[Running("a", None, 4242, 99)]), [], NOW + 2)  # its group, later
    assert (store.get_job("a").attempts, store.worker_jobs(w)[0].pgid) == (1, 4242)


def test_a_start_recorded_with_its_end_counts_the_attempt_once(store):
    add(store, id="ok")
    add(store, id="retry", max_retries=1)
    add(store, id="dead", max_retries=0)
    add(store, id="ok2")
    add(store, id="theirs")
    w = register(store)
    store.exchange(w, Exchange(claim=4), [], NOW)
    store.exchange(register(store, "w2"), Exchange(claim=1), [], NOW)
    states, _ = store.exchange(w, Exchange(ended=[
        Outcome("ok", True, 0, None, b"out", started_at=NOW + 1, ended_at=NOW + 2),
        Outcome("theirs", True, 0, None, started_at=NOW + 1),  # not this worker's: left alone
        Outcome("retry", False, 1, "exit code 1", started_at=NOW + 1),
        Outcome("ok2", True, 0, None, started_at=NOW + 1),
        Outcome("dead", False, 1, "exit code 1", started_at=NOW + 1)]), [], NOW + 3)
    assert states == [JobState.COMPLETED, None, JobState.FAILED, JobState.COMPLETED, JobState.DEAD]
    assert [(j.attempts, j.started_at) for j in map(store.get_job, ("ok", "retry", "dead", "ok2"))] == [
        (1, NOW + 1)] * 4
    assert (store.get_job("theirs").state, store.get_job("ok", output=True).stdout) == (JobState.PROCESSING, b"out")
    assert runs(store) == {"completed": 2, "failed": 1, "dead": 1}


def test_a_job_given_back_unstarted_is_ready_again_with_no_attempt_and_no_run(store):
    add(store, id="a")
    add(store, id="b")
    w = register(store)
    store.exchange(w, Exchange(claim=2), [], NOW)
    store.cancel(["b"], NOW)  # a cancel of a claimed job is a request: its worker gives it back cancelled
    store.exchange(w, Exchange(release=["a", "b"]), [], NOW + 1)
    a, b = store.get_job("a"), store.get_job("b")
    assert (a.state, a.attempts, a.worker_id) == (JobState.PENDING, 0, None)
    assert (b.state, b.attempts, b.last_error) == (JobState.CANCELLED, 0, "cancelled")
    assert runs(store) == {}
    w2 = register(store, "w2")
    assert [j.id for j in store.exchange(w2, Exchange(claim=5), [], NOW + 1)[1]] == ["a"]


def test_a_started_job_is_not_given_back_as_unstarted(store):
    add(store, id="a")
    w = register(store)
    store.exchange(w, Exchange(claim=1), [], NOW)
    store.exchange(w, Exchange(running=[Running("a", NOW)], release=["a"]), [], NOW)
    got = store.get_job("a")
    assert (got.state, got.attempts, got.worker_id) == (JobState.PROCESSING, 1, w)


def test_recovery_gives_back_unstarted_jobs_without_an_attempt_and_fails_started_ones(store):
    add(store, id="started")
    add(store, id="unstarted")
    add(store, id="unstarted-cancelled")
    dead = register(store)
    store.exchange(dead, Exchange(claim=3), [], NOW)
    store.exchange(dead, Exchange(running=[Running("started", NOW)]), [], NOW)
    store.cancel(["unstarted-cancelled"], NOW)
    assert {j.job_id: (j.started, j.attempts) for j in store.worker_jobs(dead)} == {
        "started": (True, 1), "unstarted": (False, 0), "unstarted-cancelled": (False, 0)}
    seen = store.worker_by_name("w1").seen
    assert dict(store.recover(dead, seen, NOW + 100)) == {
        "started": JobState.FAILED, "unstarted": JobState.PENDING, "unstarted-cancelled": JobState.CANCELLED}
    assert [(j.attempts, j.last_error) for j in map(store.get_job, ("started", "unstarted"))] == [
        (1, "worker lost"), (0, LOST_UNSTARTED)]
    assert runs(store) == {"recovered": 1}


def test_a_job_whose_worker_is_lost_before_its_start_is_recorded_counts_the_second_loss_in_a_row(store):
    """So a job that kills its worker at once still ends in the dead letter queue."""
    add(store, id="poison", max_retries=0)
    for n, (state, attempts) in enumerate([(JobState.PENDING, 0), (JobState.DEAD, 1)]):
        w = register(store, f"w{n}")
        assert [j.id for j in store.exchange(w, Exchange(claim=1), [], NOW)[1]] == ["poison"]
        assert dict(store.recover(w, store.worker_by_name(f"w{n}").seen, NOW + 100)) == {"poison": state}
        assert store.get_job("poison").attempts == attempts
    assert store.get_job("poison").last_error == "worker lost" and runs(store) == {"recovered": 1}


def test_one_exchange_is_one_transaction_and_a_worker_gone_changes_nothing(store):
    add(store, id="a")
    add(store, id="b")
    w = register(store)
    store.exchange(w, Exchange(claim=1), [], NOW)
    store.deregister(w)  # as a recovery by another worker does first
    with pytest.raises(WorkerGone):
        store.exchange(w, Exchange(ended=[Outcome("a", True, 0, None, started_at=NOW)], claim=1), [], NOW)
    assert [store.get_job(j).state for j in ("a", "b")] == [JobState.PROCESSING, JobState.PENDING]
    assert runs(store) == {}


def test_a_claim_takes_no_more_than_asked_and_none_from_a_paused_queue(store):
    for i in range(5):
        add(store, id=f"j{i}")
    w = register(store)
    assert [j.id for j in store.exchange(w, Exchange(claim=3), [], NOW)[1]] == ["j0", "j1", "j2"]
    assert store.exchange(w, Exchange(claim=0), [], NOW) == ([], [])
    store.set_paused(["default"], True, NOW)
    assert store.exchange(w, Exchange(claim=5), [], NOW) == ([], [])
    assert store.counts() == {"default": {"pending": 2, "processing": 3}}


def test_an_exchange_sent_again_counts_no_start_twice(store):
    # A worker sends an exchange again when it cannot tell whether the first one committed (the
    # connection was lost before the reply): starts and ends recorded twice count one attempt each.
    for job_id in ("a", "b", "c"):
        add(store, id=job_id)
    w = register(store)
    store.exchange(w, Exchange(claim=3), [], NOW)
    again = Exchange(running=[Running(j, NOW) for j in ("a", "b", "c")])
    store.exchange(w, again, [], NOW)
    store.exchange(w, again, [], NOW)
    assert [store.get_job(j).attempts for j in ("a", "b", "c")] == [1, 1, 1]
    ended = Exchange(ended=[Outcome("a", True, 0, None, b"", b"", NOW + 1, NOW),  # the hot path on PostgreSQL
                            Outcome("b", True, 0, None, b"", b"", NOW + 1, NOW)])
    assert store.exchange(w, ended, [], NOW + 1)[0] == [JobState.COMPLETED] * 2
    failed = Exchange(ended=[Outcome("c", False, 1, "exit code 1", b"", b"", NOW + 1, NOW)])
    assert store.exchange(w, failed, [], NOW + 1)[0] == [JobState.FAILED]
    assert [store.get_job(j).attempts for j in ("a", "b", "c")] == [1, 1, 1]
