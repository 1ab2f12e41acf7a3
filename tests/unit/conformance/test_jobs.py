"""Jobs, on both engines through the interface: enqueue all or none, what a job holds, listing, the counts
kept as jobs move, and idempotency keys (a held key adds nothing and names its holder)."""

import json

import pytest

from queuectl.domain.errors import Conflict, NotFound
from queuectl.domain.jobspec import parse_job
from queuectl.domain.models import JobState
from queuectl.store import DuplicateJob, Enqueued, open_store
from support.worker_steps import NOW, add, bad, claim, finish, ok, register, requeue
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_enqueued_job_is_visible_from_a_new_connection(store, db):
    add(store, id="a", command="echo 1", queue="q", priority=5, max_retries=2, timeout=3, cwd="/")
    job = open_store(db).get_job("a")
    assert (job.state, job.queue, job.priority, job.max_retries, job.timeout, job.cwd, job.attempts) == (
        JobState.PENDING, "q", 5, 2, 3.0, "/", 0)


def test_duplicate_in_a_batch_inserts_nothing(store):
    add(store, id="old")
    jobs = [parse_job('{"id":"n1","command":"x"}', NOW), parse_job('{"id":"old","command":"x"}', NOW)]
    with pytest.raises(DuplicateJob) as e:
        store.enqueue(jobs, NOW)
    assert e.value.job_id == "old"
    with pytest.raises(NotFound):
        store.get_job("n1")
    twice = [parse_job('{"id":"t","command":"x"}', NOW), parse_job('{"id":"t","command":"y"}', NOW)]
    with pytest.raises(DuplicateJob, match="'t'"):
        store.enqueue(twice, NOW)
    assert store.counts() == {"default": {"pending": 1}}


def test_list_jobs_filters_newest_first(store):
    for i in range(5):
        add(store, id=f"j{i}", queue="a" if i < 3 else "b")
    assert [j.id for j in store.list_jobs(limit=2)] == ["j4", "j3"]
    assert [j.id for j in store.list_jobs(queue="a")] == ["j2", "j1", "j0"]
    assert store.list_jobs(state=JobState.DEAD) == []


def test_the_dead_letter_queue_lists_the_most_recently_dead_first(store):
    """Dead jobs by when they died (finished_at), not when they were enqueued: a job enqueued first that died last
    heads the list (what `dlq list`, `top` and the dashboard show as the newest)."""
    for i in range(3):
        add(store, id=f"d{i}", queue="a" if i else "b", max_retries=0)
    w = register(store, slots=3)
    claim(store, w, [], 3, NOW)
    for i, job_id in enumerate(("d1", "d2", "d0")):  # d0, enqueued first, dies last
        assert finish(store, w, [bad(job_id)], NOW + i) == [JobState.DEAD]
    assert [j.id for j in store.list_jobs(state=JobState.DEAD)] == ["d0", "d2", "d1"]
    assert [j.id for j in store.list_jobs(state=JobState.DEAD, limit=1)] == ["d0"]
    assert [j.id for j in store.list_jobs(state=JobState.DEAD, queue="a")] == ["d2", "d1"]
    assert [j.id for j in store.list_jobs()] == ["d2", "d1", "d0"]  # every state: newest enqueued first


def test_counts_kept_by_triggers_match_the_rows(store):
    for i in range(20):
        add(store, id=f"j{i}", queue="q" if i % 2 else "r", max_retries=i % 3)
    w = register(store, slots=20)
    jobs = claim(store, w, [], 20, NOW)
    finish(store, w, [ok(j.id) if i % 3 else bad(j.id) for i, j in enumerate(jobs[:15])], NOW)
    requeue(store, w, [jobs[15].id], NOW)
    actual: dict = {}
    rows = store.list_jobs(limit=100)  # the rows themselves, read one by one
    assert len(rows) == 20
    for job in rows:
        by_state = actual.setdefault(job.queue, {})
        by_state[job.state.value] = by_state.get(job.state.value, 0) + 1
    assert store.counts() == actual


def keyed(job_id: str, key: str = "k"):
    return parse_job(json.dumps({"id": job_id, "command": "true", "key": key}), NOW)


def test_a_held_key_adds_nothing_and_names_its_holder_until_the_holder_ends(store):
    assert store.enqueue([keyed("a")], NOW) == [Enqueued("a")]
    assert store.enqueue([keyed("b")], NOW) == [Enqueued("a", JobState.PENDING)]
    w = register(store)
    claim(store, w, [], 1, NOW)
    assert store.enqueue([keyed("b")], NOW) == [Enqueued("a", JobState.PROCESSING)]
    finish(store, w, [bad("a")], NOW)  # failed, waiting for its retry: still holds the key
    assert store.enqueue([keyed("b")], NOW) == [Enqueued("a", JobState.FAILED)]
    claim(store, w, [], 1, NOW + 100)
    finish(store, w, [ok("a")], NOW + 100)
    assert store.enqueue([keyed("b")], NOW + 100) == [Enqueued("b")]  # a ended: the key is free
    assert (store.get_job("a").key, store.get_job("b").key) == ("k", "k")
    assert store.counts() == {"default": {"completed": 1, "pending": 1}}


def test_keys_in_one_batch_are_matched_in_order_and_other_jobs_keep_their_place(store):
    got = store.enqueue([keyed("a", "x"), parse_job('{"id": "plain", "command": "true"}', NOW), keyed("b", "x"),
                         keyed("c", "y")], NOW)
    assert got == [Enqueued("a"), Enqueued("plain"), Enqueued("a", JobState.PENDING), Enqueued("c")]
    w = register(store, slots=3)
    assert [j.id for j in claim(store, w, [], 3, NOW)] == ["a", "plain", "c"]  # enqueue order
    with pytest.raises(DuplicateJob):  # an id that exists is refused, key or not, and nothing is added
        store.enqueue([keyed("d", "z"), keyed("a", "fresh")], NOW)
    with pytest.raises(NotFound):
        store.get_job("d")


def test_a_dead_or_cancelled_job_frees_its_key_and_is_not_retried_while_another_holds_it(store):
    store.enqueue([keyed("first")], NOW)
    store.cancel(["first"], NOW)
    assert store.enqueue([keyed("second")], NOW) == [Enqueued("second")]
    with pytest.raises(Conflict, match="key 'k' is held by job 'second' \\(pending\\)"):
        store.retry(["first"], NOW)
    assert store.get_job("first").state == JobState.CANCELLED
    store.cancel(["second"], NOW)
    store.retry(["first"], NOW)
    assert store.get_job("first").state == JobState.PENDING


def test_held_keys_are_those_of_jobs_not_ended_by_key_with_how_many_in_all(store):
    store.enqueue([keyed("b", "y"), keyed("a", "x"), keyed("c", "z"), keyed("d", "w")], NOW)
    w = register(store)
    assert [j.id for j in claim(store, w, [], 1, NOW)] == ["b"]
    store.cancel(["c"], NOW)  # ended: its key is free
    claim(store, w, [], 1, NOW)
    finish(store, w, [ok("a")], NOW)  # ended too
    assert store.held_keys() == ([("w", "d", JobState.PENDING), ("y", "b", JobState.PROCESSING)], 2)
    assert store.held_keys(limit=1) == ([("w", "d", JobState.PENDING)], 2)
