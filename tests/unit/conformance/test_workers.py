"""Workers and recovery, on both engines through the interface: registration, heartbeats on both clocks, the
jobs a worker holds, recovery of a lost worker's jobs (re-checked in its transaction), same-name replacement,
orphans, and leases."""

import pytest

from queuectl.domain.clock import Instant
from queuectl.domain.errors import Conflict
from queuectl.domain.models import JobState
from queuectl.store import WorkerGone
from support.backdoor import behind_queuectls_back
from support.worker_steps import NOW, add, claim, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_recovery_of_a_lost_worker_counts_a_failed_attempt(store):
    add(store, id="a", max_retries=1)
    add(store, id="b", max_retries=0)
    dead = register(store, "dead", now=NOW)
    claim(store, dead, [], 2, NOW)
    live = register(store, "live", now=NOW)
    store.heartbeat(live, NOW + 10)
    held = store.worker_jobs(dead)
    assert {j.job_id for j in held} == {"a", "b"} and {j.host for j in held} == {"testhost"}
    recovered = dict(store.recover(dead, store.worker_by_name("dead").seen, NOW + 10))
    assert recovered == {"a": JobState.FAILED, "b": JobState.DEAD}
    assert store.get_job("a").last_error == "worker lost"
    assert store.worker_by_name("dead") is None
    assert store.worker_jobs(dead) == [] and store.orphaned_jobs() == []


def test_a_worker_that_beat_since_it_was_judged_keeps_its_jobs(store, db):
    add(store, id="a")
    w = register(store, now=NOW)
    claim(store, w, [], 1, NOW)
    [judged] = store.workers()
    store.heartbeat(w, NOW + 100)  # it beats between the judgement and the recovery
    assert store.recover(w, judged.seen, NOW + 101) == []  # re-checked inside the transaction
    assert store.get_job("a").state == JobState.PROCESSING
    assert store.worker_by_name("w1").seen == (judged.beats + 1, NOW + 100)
    # A worker of version 2 beats without counting (no queuectl of today can): its heartbeat time still tells.
    behind_queuectls_back(db, "UPDATE workers SET heartbeat_at = ?", (NOW + 105,))
    assert store.recover(w, (judged.beats + 1, NOW + 100), NOW + 106) == []
    assert store.recover(w, (judged.beats + 1, NOW + 105), NOW + 106) == [("a", JobState.FAILED)]


def test_jobs_whose_worker_row_is_gone_are_recovered_as_orphans(store):
    add(store, id="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    store.deregister(w)  # its jobs left processing: as a crash between two statements of an old version might
    [orphan] = store.orphaned_jobs()
    assert (orphan.job_id, orphan.host) == ("a", None)
    assert store.recover(None, None, NOW) == [("a", JobState.FAILED)]


def test_a_worker_recovered_while_it_waited_claims_nothing(store):
    add(store, id="a")
    w = register(store)
    store.recover(w, store.worker_by_name("w1").seen, NOW)
    with pytest.raises(WorkerGone):
        claim(store, w, [], 1, NOW)
    assert store.get_job("a").state == JobState.PENDING


def test_replacing_a_same_name_worker_that_beat_since_is_refused(store):
    add(store, id="a")
    w1 = register(store, "same")
    claim(store, w1, [], 1, NOW)
    seen = store.worker_by_name("same").seen
    store.heartbeat(w1, NOW + 1)
    info = {"name": "same", "host": "h", "boot_id": "b", "pid": 2, "pid_start": 2, "slots": 1, "queues": []}
    with pytest.raises(Conflict, match="came back to life"):
        store.register_worker(info, NOW + 2, replace=w1, replace_seen=seen)
    assert store.get_job("a").state == JobState.PROCESSING and store.worker_by_name("same").id == w1


def test_replacing_a_same_name_worker_that_another_worker_recovered_meanwhile_registers(store):
    add(store, id="a")
    dead = register(store, "same")
    claim(store, dead, [], 1, NOW)
    seen = store.worker_by_name("same").seen
    assert dict(store.recover(dead, seen, NOW + 1)) == {"a": JobState.FAILED}  # a peer was first
    info = {"name": "same", "host": "h", "boot_id": "b", "pid": 2, "pid_start": 2, "slots": 1, "queues": []}
    new, recovered = store.register_worker(info, NOW + 2, replace=dead, replace_seen=seen)
    assert recovered == [] and store.worker_by_name("same").id == new != dead
    assert store.get_job("a").attempts == 1


def test_heartbeat_reports_a_lost_registration(store):
    w = register(store)
    assert store.heartbeat(w, NOW)
    store.recover(w, store.worker_by_name("w1").seen, NOW + 100)
    assert not store.heartbeat(w, NOW + 100)


def test_heartbeat_records_both_clocks_and_counts(store):
    w = register(store, now=Instant(NOW, 50.0, "boot-a"))
    assert (store.worker_by_name("w1").heartbeat_mono, store.worker_by_name("w1").beats) == (50.0, 0)
    store.heartbeat(w, Instant(NOW + 3600, 55.0, "boot-a"))  # the wall clock stepped; the monotonic did not
    info = store.worker_by_name("w1")
    assert (info.heartbeat_at, info.heartbeat_mono, info.beats) == (NOW + 3600, 55.0, 1)


def test_register_same_name_conflicts_unless_replacing(store):
    w1 = register(store, "same")
    with pytest.raises(Conflict):
        register(store, "same")
    add(store, id="a")
    claim(store, w1, [], 1, NOW)
    info = {"name": "same", "host": "h", "boot_id": "b", "pid": 2, "pid_start": 2, "slots": 1, "queues": []}
    w2, recovered = store.register_worker(info, NOW + 1, replace=w1)
    assert w2 != w1 and recovered == [("a", JobState.FAILED)]
    assert store.worker_by_name("same").pid == 2


def test_workers_list_their_running_jobs(store):
    add(store, id="a")
    add(store, id="b")
    w = register(store, slots=2, queues=["x", "y"])
    claim(store, w, [], 2, NOW)
    [info] = store.workers()
    assert info.job_ids == ("a", "b") and info.queues == "x,y"
    assert info.to_dict(NOW + 2)["busy"] == 2


def test_one_retention_lease_holder_at_a_time(store):
    a, b = register(store, "a"), register(store, "b")
    assert store.take_lease("retention", a, NOW, 60)
    assert not store.take_lease("retention", b, NOW + 1, 60)
    assert store.take_lease("retention", a, NOW + 30, 60)  # renewed
    assert store.take_lease("retention", b, NOW + 91, 60)  # expired: taken over
    store.deregister(b)
    assert store.take_lease("retention", a, NOW + 92, 60)  # its holder is gone


def test_a_worker_that_drains_says_since_when(store):
    w = register(store)
    assert store.worker_by_name("w1").draining_since is None
    store.mark_draining(w, NOW + 1)
    store.mark_draining(w, NOW + 2)  # a second stop request: it drains since the first
    assert [(i.name, i.draining_since) for i in store.workers()] == [("w1", NOW + 1)]
