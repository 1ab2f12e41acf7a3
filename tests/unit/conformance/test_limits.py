"""Queue limits, on both engines through the interface: concurrency and rate limits kept inside the claim
transaction, race-free between workers claiming at once, never holding other queues back, on the monotonic clock
across wall-clock steps; recovery frees a place; the store refuses limits out of range."""

from __future__ import annotations

import importlib
import threading

import pytest

from queuectl.domain.clock import Instant
from queuectl.domain.errors import InvalidInput
from queuectl.store import open_store
from queuectl.store.request import Exchange
from queuectl.store.limits import RATE_SLACK
from support.backdoor import behind_queuectls_back
from support.worker_steps import NOW, add, at, claim, finish, ok, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES




def fill(store, queue, n, **fields):
    return [add(store, id=f"{queue}-{i}", queue=queue, **fields) for i in range(n)]


def processing(store, queue) -> int:
    return store.counts().get(queue, {}).get("processing", 0)


def test_a_concurrency_limit_caps_claims_and_other_queues_fill_the_rest(store):
    fill(store, "build", 6)
    fill(store, "other", 4)
    store.set_limit("build", at(NOW), concurrency=2)
    w1, w2 = register(store, "w1", slots=4), register(store, "w2", slots=4)
    got = {j.id for j in claim(store, w1, [], 4, NOW)}
    assert got == {"build-0", "build-1", "other-0", "other-1"}  # no head-of-line blocking
    assert {j.queue for j in claim(store, w2, [], 4, NOW)} == {"other"}  # build is full
    assert claim(store, w2, ["build"], 4, NOW) == []
    finish(store, w1, [ok("build-0")], NOW)
    assert [j.id for j in claim(store, w2, [], 4, NOW)] == ["build-2"]  # the place it freed
    assert processing(store, "build") == 2


def test_priorities_order_the_claims_within_a_limited_queue(store):
    add(store, id="low", queue="build", priority=0)
    add(store, id="high", queue="build", priority=5)
    add(store, id="mid", queue="build", priority=3)
    store.set_limit("build", at(NOW), concurrency=2)
    w = register(store, slots=3)
    assert [j.id for j in claim(store, w, [], 3, NOW)] == ["high", "mid"]


def test_claims_ahead_take_at_most_half_the_room_left_beyond_the_free_slots(store):
    fill(store, "build", 20)
    fill(store, "other", 5)
    store.set_limit("build", at(NOW), concurrency=7)
    w, w2 = register(store, "w1", slots=2), register(store, "w2", slots=2)
    _, jobs, limited, _ = store.exchange(w, Exchange(claim=12, free=1), [], NOW)  # 1 slot free, 11 claimed ahead
    assert [j.queue for j in jobs].count("build") == 4 and len(jobs) == 9  # 1 + (7 - 1) // 2, and the others
    assert limited == frozenset({"build"})
    jobs = store.exchange(w2, Exchange(claim=12, free=2), [], NOW).jobs  # 3 places left: the free slots' 2 ...
    assert [j.queue for j in jobs] == ["build", "build"]
    assert [j.queue for j in claim(store, w2, [], 12, NOW)] == ["build"]  # ... and the last one
    assert processing(store, "build") == 7


def test_a_recovered_job_frees_its_place(store):
    fill(store, "build", 3)
    store.set_limit("build", at(NOW), concurrency=1)
    dead, alive = register(store, "dead"), register(store, "alive")
    assert len(claim(store, dead, [], 1, NOW)) == 1
    assert claim(store, alive, [], 1, NOW) == []
    store.recover(dead, store.worker_by_name("dead").seen, NOW)
    assert len(claim(store, alive, [], 1, NOW)) == 1


def test_a_rate_limit_holds_in_every_window_of_its_length(store):
    fill(store, "mail", 20)
    store.set_limit("mail", at(NOW), rate=(5, 2.0))
    w = register(store, slots=20)
    starts = []
    t = NOW
    while len(starts) < 20 and t < NOW + 30:
        starts += [t] * len(claim(store, w, [], 20, t))
        t += 0.1
    assert len(starts) == 20
    for s in starts:  # no window of 2 s (plus the slack for the claim-to-start delay) holds more than 5
        assert sum(s <= u < s + 2.0 + RATE_SLACK for u in starts) <= 5
    assert starts[5] - starts[0] == pytest.approx(2.0 + RATE_SLACK + 0.1, abs=0.11)  # and the next five come then


def test_rate_room_at_is_when_the_window_frees_a_place_of_a_queue_held_back(store):
    fill(store, "mail", 3)
    store.set_limit("mail", at(NOW), rate=(2, 2.0))
    store.set_limit("build", at(NOW), concurrency=1)
    fill(store, "build", 2)
    w = register(store, slots=5)
    assert store.rate_room_at([], at(NOW)) is None  # the window is empty: nothing held back
    assert len(claim(store, w, ["mail"], 5, NOW)) == 2
    assert len(claim(store, w, ["mail"], 5, NOW + 1)) == 0
    assert store.rate_room_at([], at(NOW + 1)) == pytest.approx(NOW + 2.0 + RATE_SLACK)
    assert store.rate_room_at(["mail", "build"], at(NOW + 1)) == pytest.approx(NOW + 2.0 + RATE_SLACK)
    assert store.rate_room_at(["build"], at(NOW + 1)) is None  # a concurrency limit has no window
    store.set_paused(["mail"], True, NOW + 1)
    assert store.rate_room_at([], at(NOW + 1)) is None  # a paused queue waits for its resume, not its window
    store.set_paused(["mail"], False, NOW + 1)
    store.cancel(["mail-2"], NOW + 1)
    assert store.rate_room_at([], at(NOW + 1)) is None  # nothing of it is due


def test_a_forward_wall_clock_step_frees_no_place_in_a_rate_window(store):
    """The wall clock steps +1 h, the monotonic one 0.2 s (issue 25: three starts within 0.22 s): the two claims
    still fill the window of --rate 2/5s until 5 s (and the slack) have passed on the monotonic clock."""
    fill(store, "rq", 6)
    store.set_limit("rq", at(NOW), rate=(2, 5.0))
    w = register(store, slots=6)
    assert len(claim(store, w, [], 6, at(NOW))) == 2
    ahead_1h = Instant(NOW + 3600.2, NOW + 0.2, "test-boot")
    assert claim(store, w, [], 6, ahead_1h) == []
    # A place comes back 5.3 s later on the monotonic clock, said on the (stepped) wall clock.
    assert store.rate_room_at([], ahead_1h) == pytest.approx(NOW + 3600.2 + 5.0 + RATE_SLACK - 0.2, abs=0.01)
    assert claim(store, w, [], 6, Instant(NOW + 3604.9, NOW + 4.9, "test-boot")) == []
    assert len(claim(store, w, [], 6, Instant(NOW + 3605.6, NOW + 5.6, "test-boot"))) == 2


def test_a_backward_wall_clock_step_holds_a_queue_one_window_at_most(store):
    """-1 h on the wall clock: the queue goes on when the window has passed on the monotonic clock (issue 25:
    none of 6 jobs ran in the next 60 s)."""
    fill(store, "rq", 6)
    store.set_limit("rq", at(NOW), rate=(2, 5.0))
    w = register(store, slots=6)
    assert len(claim(store, w, [], 6, at(NOW))) == 2
    behind_1h = Instant(NOW - 3600 + 1.0, NOW + 1.0, "test-boot")
    assert claim(store, w, [], 6, behind_1h) == []
    assert store.rate_room_at([], behind_1h) == pytest.approx(NOW - 3600 + 5.0 + RATE_SLACK, abs=0.01)
    assert len(claim(store, w, [], 6, Instant(NOW - 3600 + 5.6, NOW + 5.6, "test-boot"))) == 2


def test_claims_of_another_boot_are_counted_on_the_wall_clock_and_a_step_back_holds_one_window(store):
    """Claims recorded by another boot (another host, or before a reboot) have no monotonic reading this reader
    shares: they count on the store's wall clock; found ahead of it (the clock stepped back), they count one
    whole window from then: no burst, and no hold for the length of the step."""
    fill(store, "rq", 6)
    store.set_limit("rq", at(NOW), rate=(2, 5.0))
    w = register(store, slots=6)
    assert len(claim(store, w, [], 6, Instant(NOW, 50.0, "boot-a"))) == 2
    assert claim(store, w, [], 6, Instant(NOW + 5.0, 1.0, "boot-b")) == []  # in the window, on the wall clock
    behind = Instant(NOW - 3600, 2.0, "boot-b")
    assert claim(store, w, [], 6, behind) == []  # in the future: counted again as made now
    assert store.rate_room_at([], behind) == pytest.approx(NOW - 3600 + 5.0 + RATE_SLACK, abs=0.01)
    assert claim(store, w, [], 6, Instant(NOW - 3600 + 5.0, 7.0, "boot-b")) == []
    assert len(claim(store, w, [], 6, Instant(NOW - 3600 + 5.6, 7.6, "boot-b"))) == 2


def test_claims_recorded_before_the_migration_still_count_on_the_wall_clock(db, monkeypatch):
    """A database of the version before (queue_starts without boot and mono: SQLite 8, PostgreSQL 6) keeps its
    limits and claims through the migration; those claims count on the wall clock, the new ones on the
    monotonic clock."""
    engine = importlib.import_module("queuectl.store.postgres.store" if db.startswith("postgresql")
                                     else "queuectl.store.sqlite.store")
    monkeypatch.setattr(engine, "SCHEMA_VERSION", engine.SCHEMA_VERSION - 1)
    # Rows of the older schema, which no queuectl of today can write.
    behind_queuectls_back(db, "INSERT INTO queues (name, rate_count, rate_window) VALUES ('rq', 2, 5.0)")
    behind_queuectls_back(db, "INSERT INTO queue_starts (queue, at) VALUES ('rq', ?)", (NOW,))
    monkeypatch.undo()
    with open_store(db) as store:
        fill(store, "rq", 4)
        w = register(store, slots=4)
        assert len(claim(store, w, [], 4, Instant(NOW + 1, 3.0, "boot-x"))) == 1  # the old claim fills half
        assert claim(store, w, [], 4, Instant(NOW + 5.4, 7.4, "boot-x")) == []
        assert len(claim(store, w, [], 4, Instant(NOW + 5.6, 7.6, "boot-x"))) == 1  # it is 5.5 s old
        assert len(claim(store, w, [], 4, Instant(NOW + 5.6, 8.6, "boot-x"))) == 1  # the new one, on mono


def test_concurrent_claims_keep_the_limit(store, db):
    """Workers that claim at the same moment, each on its connection, take 2 places in all, round after round."""
    fill(store, "build", 40)
    store.set_limit("build", at(NOW), concurrency=2)
    ids = [register(store, f"w{i}", slots=2) for i in range(4)]
    for _ in range(5):
        barrier, got, errors = threading.Barrier(4), [], []

        def claimer(worker_id):
            try:
                with open_store(db) as s:
                    barrier.wait()
                    got.extend((worker_id, j.id) for j in claim(s, worker_id, [], 2, NOW))
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=claimer, args=(w,)) for w in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and len(got) == 2, got
        for worker_id, job_id in got:
            finish(store, worker_id, [ok(job_id)], NOW)
    assert store.counts()["build"] == {"completed": 10, "pending": 30}


def test_the_one_statement_exchange_keeps_limits_too(store):
    """A worker's usual exchange (ends recorded and a claim, all successes): one statement on PostgreSQL,
    which hands the claim to the limited path while a limit is in force."""
    fill(store, "build", 4)
    store.set_limit("build", at(NOW), concurrency=1)
    w = register(store, slots=4)
    (first,) = claim(store, w, [], 4, NOW)
    states, jobs, limited, _ = store.exchange(w, Exchange(ended=[ok(first.id)], claim=4), [], NOW)
    assert [s.value for s in states] == ["completed"] and len(jobs) == 1 and limited == frozenset({"build"})
    _, jobs2, limited2, _ = store.exchange(w, Exchange(claim=4), [], NOW)
    assert jobs2 == [] and limited2 == frozenset({"build"})
    store.set_limit("build", at(NOW), concurrency=None)
    _, jobs3, limited3, _ = store.exchange(w, Exchange(claim=4), [], NOW)
    assert len(jobs3) == 2 and limited3 == frozenset()
    assert store.exchange(w, Exchange(), [], NOW).limited is None  # no claim: nothing seen


def test_limits_survive_pause_and_resume_and_clear_leaves_pause(store):
    store.set_limit("build", at(NOW), concurrency=2, rate=(30, 60.0))
    store.set_paused(["build"], True, NOW)
    store.set_paused(["build"], False, NOW)
    (lim,) = store.queue_limits()
    assert (lim.queue, lim.concurrency, lim.rate_count, lim.rate_window, lim.text) == (
        "build", 2, 30, 60.0, "concurrency 2, rate 30/1m")
    store.set_paused(["build"], True, NOW)
    store.set_limit("build", at(NOW), concurrency=None, rate=None)
    assert store.queue_limits() == [] and list(store.paused_queues()) == ["build"]


@pytest.mark.parametrize("limits", [dict(concurrency=0), dict(concurrency=2**31), dict(rate=(0, 1.0)),
                                    dict(rate=(2**31, 1.0)), dict(rate=(5, 0.0)), dict(rate=(5, 366 * 86400 + 1))])
def test_the_store_refuses_limits_out_of_range_and_keeps_the_old_ones(store, limits):
    """The store checks what it keeps (the database's integer; a window of at most 366 days), not only the CLI."""
    store.set_limit("build", at(NOW), concurrency=3, rate=(10, 60.0))
    with pytest.raises(InvalidInput):
        store.set_limit("build", at(NOW), **limits)
    (lim,) = store.queue_limits()
    assert (lim.concurrency, lim.rate_count, lim.rate_window) == (3, 10, 60.0)
