"""The worker's exchange with the store (queuectl.store.base.Exchange), on SQLite and PostgreSQL:
what a claim counts, a start recorded with its end, jobs given back unstarted, recovery of jobs
claimed and not started, and that one exchange is one transaction."""

import pytest

from queuectl.backoff import last_attempt
from queuectl.models import JobState
from queuectl.store import Exchange, Outcome, Running, WorkerGone
from unit.test_store import NOW, add, register


@pytest.fixture
def db(backend_db):
    return backend_db


def runs(store) -> dict:
    return store.run_counts().get("default", {})


def test_a_claim_counts_no_attempt_until_the_start_is_recorded(store):
    add(store, id="a")
    w = register(store)
    _, [job], _ = store.exchange(w, Exchange(claim=5), [], NOW)
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
    states, _, _ = store.exchange(w, Exchange(ended=[
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


def test_recovery_counts_jobs_that_may_have_run_and_gives_back_those_that_cannot_have(store):
    # A start not recorded may have happened (lazy records): it counts, unless the job was to run its
    # last attempt (recorded before it runs) or a cancel was asked (it is cancelled).
    add(store, id="started")
    add(store, id="unstarted")
    add(store, id="unstarted-cancelled")
    add(store, id="unstarted-last", max_retries=0)
    dead = register(store)
    store.exchange(dead, Exchange(claim=4), [], NOW)
    store.exchange(dead, Exchange(running=[Running("started", NOW)]), [], NOW)
    store.cancel(["unstarted-cancelled"], NOW)
    assert {j.job_id: (j.started, j.attempts) for j in store.worker_jobs(dead)} == {
        "started": (True, 1), "unstarted": (False, 0), "unstarted-cancelled": (False, 0),
        "unstarted-last": (False, 0)}
    seen = store.worker_by_name("w1").seen
    assert dict(store.recover(dead, seen, NOW + 100)) == {
        "started": JobState.FAILED, "unstarted": JobState.FAILED, "unstarted-cancelled": JobState.CANCELLED,
        "unstarted-last": JobState.PENDING}
    assert [(j.attempts, j.last_error) for j in map(store.get_job, ("started", "unstarted", "unstarted-last"))] == [
        (1, "worker lost"), (1, "worker lost"), (0, None)]
    assert runs(store) == {"recovered": 2}


@pytest.mark.parametrize("max_retries", [0, 2])
def test_a_job_whose_worker_is_lost_at_each_start_runs_at_most_max_retries_plus_one_times(store, max_retries):
    """Each attempt but the last is lost before its start is recorded, the last one after its start was
    recorded first, as a worker does (queuectl.backoff.last_attempt): the job is dead after exactly
    max_retries + 1 runs, and never given back uncounted after a run."""
    add(store, id="poison", max_retries=max_retries)
    config = store.settings()
    for n in range(max_retries + 1):
        w = register(store, f"w{n}")
        now = NOW + 100 * n
        [job] = store.exchange(w, Exchange(claim=1), [], now)[1]
        assert (job.id, job.attempts) == ("poison", n)
        if last_attempt(job.attempts, job.max_retries, config):
            store.exchange(w, Exchange(running=[Running("poison", now)]), [], now)
        state = JobState.DEAD if n == max_retries else JobState.FAILED
        assert dict(store.recover(w, store.worker_by_name(f"w{n}").seen, now + 50)) == {"poison": state}
        assert store.get_job("poison").attempts == n + 1
    assert store.get_job("poison").last_error == "worker lost" and runs(store) == {"recovered": max_retries + 1}
    assert store.exchange(register(store, "late"), Exchange(claim=1), [], NOW + 10_000)[1] == []


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
    assert store.exchange(w, Exchange(claim=0), [], NOW) == ([], [], None)
    store.set_paused(["default"], True, NOW)
    assert store.exchange(w, Exchange(claim=5), [], NOW) == ([], [], None)
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
