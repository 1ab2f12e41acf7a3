"""queuectl.api.search and the bulk actions of queuectl.api.ops, on both engines: each bad field refused with
its own message and nothing read or changed, pages and their totals (kept counts, or a capped count), and a
bulk cancel or retry that changes exactly what its filter matches, in batches, and nothing when it has none."""

from __future__ import annotations

import pytest

from queuectl.api import ops, search
from queuectl.domain.errors import InvalidInput
from queuectl.domain.models import JobState
from queuectl.store.jobfilter import JobFilter
from support.worker_steps import NOW, add, bad, claim, finish, new_job, ok, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def states(store) -> dict[str, str]:
    """Every job's state, by id."""
    return {j.id: j.state.value for j in store.list_jobs(limit=10_000)}


@pytest.mark.parametrize("fields, message", [
    ({"state": "done"}, "no job state 'done'; states: pending, processing, completed, failed, dead, cancelled, blocked"),
    ({"queue": "a b"}, "queue names are 1-64 characters of letters, digits and ._-, got 'a b'"),
    ({"key": "k y"}, "key must be 1-128 characters of letters, digits and ._:@+=-"),
    ({"after": "a/b"}, "after (a job id) must be 1-128 characters of letters, digits and ._:@+=-"),
    ({"id_prefix": "j*"}, "an id prefix must be 1-128 characters of letters, digits and ._:@+=-"),
    ({"id_prefix": "j" * 129}, "an id prefix must be 1-128 characters of letters, digits and ._:@+=-"),
    ({"text": "x" * 201}, "the text to search for is longer than 200 characters"),
    ({"text": "a\0b"}, "the text to search for holds a NUL character or a lone surrogate"),
    ({"text": "a\ud800"}, "the text to search for holds a NUL character or a lone surrogate"),
    ({"text": 5}, "text must be text, not int"),
    ({"limit": 0}, "limit must be a whole number from 1 to 500, not 0"),
    ({"limit": 501}, "limit must be a whole number from 1 to 500, not 501"),
    ({"limit": "5"}, "limit must be a whole number from 1 to 500, not '5'"),
    ({"limit": True}, "limit must be a whole number from 1 to 500, not True"),
    ({"before": 0}, "before (a job's seq) must be a whole number from 1 to 9223372036854775807, not 0"),
    ({"before": "3"}, "before (a job's seq) must be a whole number from 1 to 9223372036854775807, not '3'"),
    ({"before": 2**63}, "before (a job's seq) must be a whole number from 1 to 9223372036854775807,"
                        " not 9223372036854775808"),
])
def test_each_bad_input_is_refused_with_its_message(store, fields, message):
    with pytest.raises(InvalidInput) as e:
        search.search(store, **fields)
    assert str(e.value) == message


def test_the_longest_good_values_are_taken(store):
    add(store, id="j" * 128, command="x" * 200)
    page = search.search(store, id_prefix="j" * 128, text="X" * 200, limit=500)
    assert [j.id for j in page.jobs] == ["j" * 128] and page.total == 1


def test_an_empty_value_is_no_filter(store):
    add(store, id="a")
    assert search.job_filter(state="", queue="", key="", after="", text="", id_prefix="") == JobFilter()
    assert [j.id for j in search.search(store, state="", text="").jobs] == ["a"]


def test_pages_go_on_from_next_before_until_a_page_is_not_full(store):
    store.enqueue([new_job(id=f"j{i}", queue="q") for i in range(5)], NOW)
    first = search.search(store, queue="q", limit=2)
    assert [j.id for j in first.jobs] == ["j4", "j3"] and first.next_before == first.jobs[-1].seq
    assert (first.total, first.capped) == (5, False)
    second = search.search(store, queue="q", limit=2, before=first.next_before)
    third = search.search(store, queue="q", limit=2, before=second.next_before)
    assert [j.id for j in second.jobs + third.jobs] == ["j2", "j1", "j0"] and third.next_before is None


def test_the_total_is_the_kept_counts_for_state_and_queue_else_a_capped_count(store, monkeypatch):
    store.enqueue([new_job(id=f"j{i}", queue="q", command=f"echo {i}") for i in range(6)], NOW)
    store.cancel(["j0"], NOW)
    calls = []
    count_jobs = store.count_jobs
    monkeypatch.setattr(store, "count_jobs", lambda f, cap: calls.append(cap) or count_jobs(f, cap))
    assert search.search(store, state="pending", queue="q", limit=1)[2:] == (5, False)
    assert search.search(store, queue="q", limit=1).total == 6 and calls == []  # no count read: the kept ones
    monkeypatch.setattr(search, "COUNT_CAP", 3)
    assert search.search(store, text="ECHO", limit=1)[2:] == (3, True)  # 6 match: "3 or more"
    assert search.search(store, id_prefix="j0")[2:] == (1, False)
    assert calls == [3, 3]


# -- bulk actions ------------------------------------------------------------------------------------------------

@pytest.fixture
def mixed(store):
    """Jobs of queues build and deploy in several states: b-* in build (b-done completed, b-dead dead, b-gone
    cancelled, b-run processing, the rest pending), d-* in deploy (pending, d-dead dead)."""
    store.enqueue([new_job(id="b-done", queue="build"), new_job(id="b-dead", queue="build", max_retries=0),
                   new_job(id="d-dead", queue="deploy", max_retries=0), new_job(id="b-run", queue="build")], NOW)
    w = register(store, slots=4)
    assert [j.id for j in claim(store, w, [], 4, NOW)] == ["b-done", "b-dead", "d-dead", "b-run"]
    finish(store, w, [bad("b-dead"), bad("d-dead"), ok("b-done")], NOW)
    store.enqueue([new_job(id=f"b{i}", queue="build", command=f"make part{i}") for i in range(7)], NOW)
    store.enqueue([new_job(id=f"d{i}", queue="deploy", command=f"make part{i}") for i in range(3)], NOW)
    store.enqueue([new_job(id="b-gone", queue="build")], NOW)
    store.cancel(["b-gone"], NOW)
    return store


def test_the_mixed_set_is_as_the_bulk_tests_assume(mixed):
    assert states(mixed) == {"b-done": "completed", "b-dead": "dead", "d-dead": "dead", "b-run": "processing",
                             **{f"b{i}": "pending" for i in range(7)}, **{f"d{i}": "pending" for i in range(3)},
                             "b-gone": "cancelled"}


@pytest.mark.parametrize("batch", [2, 3, 500])
def test_a_bulk_cancel_cancels_exactly_what_its_filter_matches(mixed, batch):
    before = states(mixed)
    done = ops.cancel_matching(mixed, search.job_filter(queue="build"), batch=batch)
    assert (done.matched, done.changed, done.requested, done.skipped) == (11, 7, 1, 3)
    assert done.reasons == ("job 'b-gone' is cancelled; only pending, blocked, failed and processing jobs can be"
                            " cancelled", "job 'b-dead' is dead; only pending, blocked, failed and processing jobs"
                            " can be cancelled", "job 'b-done' is completed; only pending, blocked, failed and"
                            " processing jobs can be cancelled")
    after = states(mixed)
    assert after == {**before, **{f"b{i}": "cancelled" for i in range(7)}}  # b-run: its worker was asked
    assert mixed.get_job("b-run").state == JobState.PROCESSING


def test_a_bulk_cancel_by_text_and_queue_leaves_the_other_queue(mixed):
    before = states(mixed)
    done = ops.cancel_matching(mixed, search.job_filter(queue="deploy", text="PART1"), batch=1)
    assert (done.matched, done.changed, done.skipped) == (1, 1, 0)
    assert states(mixed) == {**before, "d1": "cancelled"}  # b1 holds "part1" too, in build


@pytest.mark.parametrize("batch", [1, 2, 500])
def test_a_bulk_retry_retries_the_dead_and_cancelled_it_matches_and_skips_the_others(mixed, batch):
    mixed.cancel(["b3", "d2"], NOW)
    before = states(mixed)
    done = ops.retry_matching(mixed, search.job_filter(queue="build"), batch=batch)
    assert (done.matched, done.changed, done.requested, done.skipped) == (11, 3, 0, 8)
    assert states(mixed) == {**before, "b3": "pending", "b-gone": "pending", "b-dead": "pending"}
    assert mixed.get_job("b-dead").attempts == 0
    assert "job 'b6' is pending; only dead or cancelled jobs can be retried" in done.reasons


def test_a_bulk_retry_brings_back_a_chain_whose_dependant_comes_first(store):
    add(store, id="root", queue="chain", max_retries=0)
    add(store, id="leaf", queue="chain", after="root")
    add(store, id="other", queue="else", max_retries=0)
    w = register(store)
    assert [j.id for j in claim(store, w, [], 2, NOW)] == ["root", "other"]
    finish(store, w, [bad("root"), bad("other")], NOW)
    assert states(store) == {"root": "dead", "leaf": "cancelled", "other": "dead"}
    done = ops.retry_matching(store, search.job_filter(queue="chain"), batch=1)  # leaf's batch comes first
    assert (done.changed, done.skipped, done.reasons) == (2, 0, ())
    assert states(store) == {"root": "pending", "leaf": "blocked", "other": "dead"}


def test_a_bulk_retry_skips_a_job_whose_key_is_held(store):
    add(store, id="old", key="k", max_retries=0)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("old")], NOW)
    add(store, id="new", key="k")
    done = ops.retry_matching(store, search.job_filter(state="dead"))
    assert (done.changed, done.skipped) == (0, 1)
    assert done.reasons == ("job 'old' cannot be retried: its key 'k' is held by job 'new' (pending) until that"
                            " one ends",)
    assert states(store) == {"old": "dead", "new": "pending"}


@pytest.mark.parametrize("action", [ops.cancel_matching, ops.retry_matching])
def test_a_bulk_action_without_a_filter_is_refused_and_changes_nothing(mixed, action):
    before = states(mixed)
    for empty in (JobFilter(), search.job_filter(state="", queue="")):
        with pytest.raises(InvalidInput) as e:
            action(mixed, empty)
        assert str(e.value) == ("a bulk action needs a filter: give a state, queue, key, dependency, text or id"
                                " prefix")
    assert states(mixed) == before


def test_jobs_enqueued_after_a_bulk_cancel_began_are_not_touched(mixed, monkeypatch):
    find_jobs, added = mixed.find_jobs, []

    def find_then_enqueue(f, before_seq=None, limit=50):
        found = find_jobs(f, before_seq, limit)
        added.append(f"late{len(added)}")
        mixed.enqueue([new_job(id=added[-1], queue="build")], NOW)  # arrives while the action runs
        return found

    monkeypatch.setattr(mixed, "find_jobs", find_then_enqueue)
    done = ops.cancel_matching(mixed, search.job_filter(queue="build", state="pending"), batch=2)
    assert done.changed == 7 and len(added) == 4
    assert {i: s for i, s in states(mixed).items() if i.startswith("late")} == dict.fromkeys(added, "pending")
