"""Dependencies between jobs (the `after` field), on both engines through the interface: a job is blocked until
every job it is after has completed and is released in the transaction that completes the last one; a dependency
that ends dead or cancelled cancels its dependants, and theirs; `retry` and `cancel` know the blocked state."""

from __future__ import annotations

import pytest

from queuectl.api import ops
from queuectl.api.outage import Patience
from queuectl.domain.models import JobState
from queuectl.store.request import Exchange, Running
from support.worker_steps import NOW, add, bad, claim, finish, new_job, ok, register, run_one
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def states(store, *job_ids) -> dict[str, str]:
    jobs = store.jobs_by_id(job_ids)
    return {job_id: jobs[job_id].state.value for job_id in job_ids}


def test_a_chain_runs_in_order_and_each_release_comes_with_the_completion(store):
    add(store, id="a")
    add(store, id="b", after="a")
    add(store, id="c", after=["b"])
    assert states(store, "a", "b", "c") == {"a": "pending", "b": "blocked", "c": "blocked"}
    w = register(store)
    assert [j.id for j in claim(store, w, [], 10, NOW)] == ["a"]  # blocked jobs are never claimed
    finish(store, w, [ok("a")], NOW)
    assert states(store, "b", "c") == {"b": "pending", "c": "blocked"}
    run_one(store, w, "b")
    run_one(store, w, "c")
    assert states(store, "a", "b", "c") == dict.fromkeys("abc", "completed")
    assert store.get_job("c").after == ("b",) and store.get_job("a").after == ()


def test_a_fan_in_waits_for_every_dependency(store):
    for job_id in ("a", "b"):
        add(store, id=job_id)
    add(store, id="c", after=["a", "b", "a"])  # a repeat counts once
    w = register(store, slots=2)
    assert {j.id for j in claim(store, w, [], 10, NOW)} == {"a", "b"}
    finish(store, w, [ok("b")], NOW)
    assert states(store, "c") == {"c": "blocked"}
    finish(store, w, [ok("a")], NOW)
    assert states(store, "c") == {"c": "pending"}
    assert store.get_job("c").after == ("a", "b")


def test_a_dead_dependency_cancels_its_dependants_and_theirs_naming_it(store):
    add(store, id="a", max_retries=0)
    add(store, id="b", after="a")
    add(store, id="c", after="b")
    add(store, id="d", after=["a", "b"])
    add(store, id="free")
    w = register(store)
    assert claim(store, w, [], 1, NOW)[0].id == "a"
    assert finish(store, w, [bad("a")], NOW) == [JobState.DEAD]
    jobs = store.jobs_by_id(["b", "c", "d", "free"])
    assert {j: jobs[j].state.value for j in jobs} == {"b": "cancelled", "c": "cancelled", "d": "cancelled",
                                                      "free": "pending"}
    assert {jobs[j].last_error for j in "bcd"} == {"dependency a is dead"}
    assert store.counts()["default"] == {"dead": 1, "cancelled": 3, "pending": 1}


def test_a_failed_attempt_with_a_retry_left_keeps_the_dependants_blocked(store):
    add(store, id="a", max_retries=1)
    add(store, id="b", after="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    assert finish(store, w, [bad("a")], NOW) == [JobState.FAILED]
    assert states(store, "b") == {"b": "blocked"}


def test_cancelling_a_blocked_job_cancels_it_and_its_dependants(store):
    add(store, id="a")
    add(store, id="b", after="a")
    add(store, id="c", after="b")
    results = store.cancel(["b"], NOW)
    assert [(r.job_id, r.state, r.result) for r in results] == [("b", JobState.BLOCKED, "cancelled")]
    assert states(store, "a", "b", "c") == {"a": "pending", "b": "cancelled", "c": "cancelled"}
    assert store.get_job("c").last_error == "dependency b was cancelled"


def test_cancelling_a_job_with_its_dependants_reports_each_as_cancelled(store):
    add(store, id="a")
    add(store, id="b", after="a")
    results = store.cancel(["a", "b"], NOW)
    assert [(r.job_id, r.result) for r in results] == [("a", "cancelled"), ("b", "cancelled")]
    results = ops.cancel(store, Patience(lambda line: None, limit=0), states=[JobState.PENDING, JobState.BLOCKED])
    assert results == []


def test_retry_brings_a_cancelled_dependant_back_blocked_or_pending(store):
    add(store, id="a", max_retries=0)
    add(store, id="b", after="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("a")], NOW)
    with pytest.raises(Exception, match="dependency 'a' is dead; retry both: queuectl retry a b"):
        store.retry(["b"], NOW)
    assert states(store, "a", "b") == {"a": "dead", "b": "cancelled"}  # all or none
    assert store.retry(["b", "a"], NOW) == [JobState.BLOCKED, JobState.PENDING]  # the order given does not matter
    run_one(store, w, "a")
    run_one(store, w, "b")
    assert states(store, "b") == {"b": "completed"}
    store.cancel(["b"], NOW)  # completed: an error, nothing changes
    add(store, id="c", after="a")
    store.cancel(["c"], NOW)
    assert store.retry(["c"], NOW) == [JobState.PENDING]  # its dependency has completed


def test_a_completed_dependency_is_satisfied_at_once_and_a_dead_one_cancels_at_enqueue(store):
    add(store, id="done")
    add(store, id="broken", max_retries=0)
    w = register(store, slots=2)
    claim(store, w, [], 2, NOW)
    finish(store, w, [ok("done"), bad("broken")], NOW)
    add(store, id="next", after="done")
    [result] = store.enqueue([new_job(id="late", after=["done", "broken"])], NOW)
    assert (result.id, result.held, result.cancelled) == ("late", None, "dependency broken is dead")
    assert states(store, "next", "late") == {"next": "pending", "late": "cancelled"}


def test_a_blocked_job_holds_its_key(store):
    add(store, id="a")
    add(store, id="b", after="a", key="k")
    [result] = store.enqueue([new_job(id="c", key="k")], NOW)
    assert (result.id, result.held) == ("b", JobState.BLOCKED)


def test_a_long_chain_is_cancelled_at_once_when_its_head_dies(store):
    """Every job of a 300-long chain is cancelled in the transaction that records its head dead (PostgreSQL's
    triggers recurse: one level per job would nest 300 deep)."""
    add(store, id="c0", max_retries=0)
    store.enqueue([new_job(id=f"c{i}", after=f"c{i - 1}") for i in range(1, 300)], NOW)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("c0")], NOW)
    jobs = store.jobs_by_id([f"c{i}" for i in range(1, 300)])
    assert {(j.state, j.last_error) for j in jobs.values()} == {(JobState.CANCELLED, "dependency c0 is dead")}


def test_a_requeued_cancel_with_no_error_still_cancels_the_dependants(store):
    add(store, id="a")
    add(store, id="b", after="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    store.exchange(w, Exchange(running=[Running("a", NOW)]), [], NOW)
    store.cancel(["a"], NOW)  # requested: a is processing
    store.exchange(w, Exchange(requeue=["a"]), [], NOW)  # a forced stop gives it back: cancelled, no error
    assert states(store, "a", "b") == {"a": "cancelled", "b": "cancelled"}
