"""Workers that ended stay visible, on both engines through the interface: a clean stop (drained, forced, burst)
and a recovery (lost) keep the registration's name, host, pid, unit and times, in the transaction that removes
it; the newest KEEP_STOPPED are kept; a read takes those since a time, newest first. The workers table, which
recovery and liveness read, is as before: the registration is gone."""

import pytest

from queuectl.domain.models import StoppedWorker
from queuectl.store.workers import KEEP_STOPPED
from support.worker_steps import NOW, add, claim, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_each_end_is_kept_with_how_and_when_and_the_registration_goes(store):
    for name in ("drained", "forced", "burst"):
        w = register(store, name, now=NOW, unit=f"queuectl-worker@{name}.service")
        store.deregister(w, name, NOW + 10)
        assert store.worker_by_name(name) is None
    lost = register(store, "lost", now=NOW)
    add(store, id="a")
    claim(store, lost, [], 1, NOW)
    store.recover(lost, store.worker_by_name("lost").seen, NOW + 20)
    assert store.workers() == [] and store.orphaned_jobs() == []  # recovery's view: as before
    assert store.stopped_workers(0.0) == [
        StoppedWorker("lost", "testhost", 1, None, NOW, NOW + 20, "lost"),
        *[StoppedWorker(name, "testhost", 1, f"queuectl-worker@{name}.service", NOW, NOW + 10, name)
          for name in ("burst", "forced", "drained")]]


def test_a_replaced_same_name_worker_is_kept_as_lost_and_a_clean_stop_defaults_to_drained(store):
    w1 = register(store, "same", now=NOW)
    info = {"name": "same", "host": "h", "boot_id": "b", "pid": 2, "pid_start": 2, "slots": 1, "queues": []}
    w2, _ = store.register_worker(info, NOW + 5, replace=w1)
    store.deregister(w2)  # at the store's clock
    [second, first] = store.stopped_workers(0.0)
    assert (first.name, first.ended, first.stopped_at) == ("same", "lost", NOW + 5)
    assert (second.name, second.host, second.pid, second.ended) == ("same", "h", 2, "drained")


def test_a_read_takes_those_since_a_time_newest_first_up_to_a_limit(store):
    for i in range(5):
        store.deregister(register(store, f"w{i}", now=NOW), "drained", NOW + i)
    assert [w.name for w in store.stopped_workers(NOW + 2)] == ["w4", "w3", "w2"]
    assert [w.name for w in store.stopped_workers(NOW, limit=2)] == ["w4", "w3"]
    assert store.stopped_workers(NOW + 5) == []


def test_the_newest_keep_stopped_are_kept(store):
    for i in range(KEEP_STOPPED + 3):
        store.deregister(register(store, f"w{i}", now=NOW), "burst", NOW + i)
    kept = store.stopped_workers(0.0, limit=10 * KEEP_STOPPED)
    assert len(kept) == KEEP_STOPPED and kept[0].name == f"w{KEEP_STOPPED + 2}" and kept[-1].name == "w3"


def test_an_unknown_ending_is_refused_and_changes_nothing(store):
    w = register(store, now=NOW)
    with pytest.raises(ValueError, match="drained, forced, burst or lost"):
        store.deregister(w, "vanished", NOW)
    assert store.worker_by_name("w1") is not None and store.stopped_workers(0.0) == []
