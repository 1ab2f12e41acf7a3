"""Operator actions, on both engines through the interface: cancel (at once or by request), retry and the dead
letter queue's retry (all or none), pause and resume, run counters that outlive the jobs, and purge."""

import pytest

from queuectl.api import ops
from queuectl.api.outage import Patience
from queuectl.domain.clock import Instant
from queuectl.domain.errors import Conflict, InvalidInput, NotFound
from queuectl.domain.models import JobState
from support.worker_steps import NOW, A, add, bad, claim, finish, finished_jobs, ok, register, requeue
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES



def test_dlq_retry_is_all_or_nothing(store):
    add(store, id="d", max_retries=0)
    add(store, id="p")
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("d")], NOW)
    with pytest.raises(Conflict, match="pending, not dead"):
        store.dlq_retry(["d", "p"], NOW)
    with pytest.raises(NotFound):
        store.dlq_retry(["d", "nope"], NOW)
    assert store.get_job("d").state == JobState.DEAD
    store.dlq_retry(["d"], NOW + 5)
    job = store.get_job("d")
    assert (job.state, job.attempts, job.run_at) == (JobState.PENDING, 0, NOW + 5)


def test_cancel_each_state(store):
    for job_id in ("p", "f", "r", "c", "d"):
        add(store, id=job_id, max_retries=0 if job_id == "d" else 3)
    w = register(store, slots=5)
    claim(store, w, [], 5, NOW)
    finish(store, w, [bad("f"), ok("c"), bad("d")], NOW)
    requeue(store, w, ["p"], NOW)
    results = {r.job_id: r for r in store.cancel(["p", "f", "r", "c", "d", "nope"], NOW + 1)}
    assert {k: r.result for k, r in results.items()} == {
        "p": "cancelled", "f": "cancelled", "r": "requested", "c": "error", "d": "error", "nope": "error"}
    assert results["r"].worker == "w1"
    assert "completed; only pending, blocked, failed and processing" in results["c"].message
    assert results["nope"].message == "no job with id 'nope'"
    assert [store.get_job(j).state for j in ("p", "f", "r", "c", "d")] == [
        JobState.CANCELLED, JobState.CANCELLED, JobState.PROCESSING, JobState.COMPLETED, JobState.DEAD]
    assert store.cancel_requests(w) == ["r"]
    assert not store.has_work([], NOW + 100)  # a cancelled retry is no work


def test_a_cancelled_running_job_ends_cancelled_unless_it_succeeded_first(store):
    for job_id in ("killed", "finished", "lost", "forced"):
        add(store, id=job_id)
    w = register(store, slots=4)
    claim(store, w, [], 4, NOW)
    store.cancel(["killed", "finished", "lost", "forced"], NOW)
    assert finish(store, w, [bad("killed", -15), ok("finished")], NOW) == [JobState.CANCELLED, JobState.COMPLETED]
    killed = store.get_job("killed", output=True)
    assert (killed.last_error, killed.stderr) == ("exit code -15", b"boom")  # its output is kept
    requeue(store, w, ["forced"], NOW)  # a second stop signal: a cancelled job does not go back to pending
    assert store.get_job("forced").state == JobState.CANCELLED
    assert store.recover(w, store.worker_by_name("w1").seen, NOW) == [("lost", JobState.CANCELLED)]
    assert not store.has_work([], NOW + 3600)


def test_cancel_matching_and_retry_of_cancelled_and_dead(store):
    add(store, id="a", queue="q1")
    add(store, id="b", queue="q1")
    add(store, id="c", queue="q2")
    assert [c.id for c in ops.cancel(store, Patience(lambda line: None, limit=0), queue="q1", states=[JobState.PENDING])] == ["a", "b"]
    assert store.get_job("c").state == JobState.PENDING
    with pytest.raises(Conflict, match="c' is pending, not dead or cancelled"):
        store.retry(["a", "c"], NOW)
    assert store.get_job("a").state == JobState.CANCELLED  # all or none
    with pytest.raises(Conflict, match="not dead; only dead"):
        store.dlq_retry(["a"], NOW)
    store.retry(["a", "b"], Instant(NOW, 5.0, A))
    assert [store.get_job(j).state for j in "ab"] == [JobState.PENDING, JobState.PENDING]


def test_paused_queues_are_not_claimed_and_hold_no_burst(store):
    add(store, id="a", queue="q1")
    add(store, id="b", queue="q2")
    assert store.set_paused(["q1", "q3"], True, NOW) == [True, True]
    assert store.set_paused(["q1"], True, NOW + 1) == [False]
    assert store.paused_queues() == {"q1": NOW, "q3": NOW}
    w = register(store, slots=2)
    assert [j.id for j in claim(store, w, [], 2, NOW)] == ["b"]
    assert not store.has_work([], NOW)  # only paused work is left
    assert store.set_paused(["q1", "q2"], False, NOW) == [True, False]
    assert [j.id for j in claim(store, w, [], 2, NOW)] == ["a"]


def test_run_outcomes_are_counted_and_survive_the_jobs(store):
    for job_id in ("ok", "retry", "dead", "lost", "gone"):
        add(store, id=job_id, max_retries=0 if job_id == "dead" else 3)
    w = register(store, slots=5)
    claim(store, w, [], 5, NOW)
    store.cancel(["gone"], NOW)
    finish(store, w, [ok("ok"), bad("retry"), bad("dead"), bad("gone")], NOW)
    store.recover(w, store.worker_by_name("w1").seen, NOW)
    assert store.run_counts() == {"default": {"completed": 1, "failed": 1, "dead": 1, "cancelled": 1,
                                              "recovered": 1}}
    store.cancel(["retry", "lost"], NOW)  # waiting for their retries: no run ends
    assert store.purge({"completed": 0, "dead": 0, "cancelled": 0}, NOW + 1) == 5
    assert store.counts() == {}
    assert sum(store.run_counts()["default"].values()) == 5
    store.maintain(w)  # on PostgreSQL, folds the counters' deltas: the totals stay
    assert store.counts() == {}
    assert sum(store.run_counts()["default"].values()) == 5


def test_purge_deletes_old_finished_jobs_only(store):
    finished_jobs(store, {"c1": ("q", "ok"), "c2": ("other", "ok"), "d1": ("q", "dead"), "x1": ("q", "cancel"),
                      "f1": ("q", "fail")})
    add(store, id="p1")
    ages = {"completed": 10, "dead": 10, "cancelled": 10}
    assert store.count_purgeable(ages, NOW + 5) == 0  # not old enough yet
    assert store.count_purgeable(ages, NOW + 11) == 4
    assert store.purge({"completed": 10}, NOW + 11, queue="q") == 1
    assert store.purge(ages, NOW + 11, limit=2) == 2  # a bounded batch
    assert store.purge(ages, NOW + 11) == 1
    assert sorted(j.id for j in store.list_jobs()) == ["f1", "p1"]  # failed and pending stay
    assert store.counts() == {"q": {"failed": 1}, "default": {"pending": 1}}
    assert store.get_job("f1", output=True).stderr == b"boom"  # its output stays (the deleted jobs' goes with
    # them: each engine's own tests, test_store_sqlite.py and test_postgres.py, read that it is gone)
    assert store.run_counts() == {"other": {"completed": 1},  # counters outlive the jobs
                                  "q": {"cancelled": 1, "completed": 1, "dead": 1, "failed": 1}}
    with pytest.raises(InvalidInput, match="not failed"):
        store.purge({"failed": 0}, NOW + 11)
    add(store, id="c1")  # a purged job's id can be used again
    assert store.get_job("c1").state == JobState.PENDING
