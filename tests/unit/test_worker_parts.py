"""The worker's components, each on its own: the claim policy's numbers, the ledger's due times, health,
outages and the duties' contract (queuectl.worker's modules state the rules). Pure rules, and a real
SQLite store where a duty reads one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable
from queuectl.store import SqliteStore
from queuectl.worker.claims import HOLD, PREFETCH_PER_SLOT, ClaimPolicy
from queuectl.worker.duties import run_due, wake_at
from queuectl.worker.duties.cancels import Cancels
from queuectl.worker.duties.recovery import RecoveryDuty
from queuectl.worker.duties.retention import RETENTION_EVERY, Retention
from queuectl.worker.duties.schedules import CHECK_EVERY, Schedules
from queuectl.worker.health import Health, Stats, status_line
from queuectl.worker.ledger import RECORD_AFTER, RECORD_WITHIN, Ledger
from queuectl.worker.outage import DB_RETRY, Outage
from queuectl.worker.output import OUTPUT_EVERY, next_output_due, output_due
from support.inprocess import Clock, Notifier, make_worker, stop_runner


class Watch:
    """Records when the other workers were given their grace (liveness.Watch.writes_resumed)."""

    def __init__(self):
        self.resumed: list[float] = []

    def writes_resumed(self, now: Instant) -> None:
        self.resumed.append(now.mono)


def job(job_id: str, queue: str = "default"):
    return SimpleNamespace(id=job_id, queue=queue)


def running(*started: float) -> dict:
    """Running jobs ({job id: RunningJob-like}) started at these monotonic times."""
    return {f"r{i}": SimpleNamespace(started=t) for i, t in enumerate(started)}


# -- the claim policy ------------------------------------------------------------------------------

def test_a_claim_takes_free_slots_until_a_short_job_ended_then_the_reserve_too():
    policy = ClaimPolicy(None, (), slots=2)
    assert policy.prefetch == 2 * PREFETCH_PER_SLOT
    assert policy.wanted(0.0, running=0, stopping=False) == 2
    assert policy.wanted(0.0, running=2, stopping=False) == 0  # slots full, jobs not known short: no claim ahead
    policy.ended("j", HOLD / 2)
    assert policy.short
    assert policy.wanted(0.0, running=2, stopping=False) == 2 * PREFETCH_PER_SLOT  # the whole reserve
    policy.reserve.extend(job(f"j{i}") for i in range(PREFETCH_PER_SLOT + 1))  # more than half left: no top-up
    assert policy.wanted(0.0, running=2, stopping=False) == 0
    policy.reserve.pop()  # half used: topped up to slots + prefetch held
    assert policy.wanted(0.0, running=2, stopping=False) == 2 + 2 * PREFETCH_PER_SLOT - 2 - PREFETCH_PER_SLOT
    policy.ended("j", HOLD)  # a job of HOLD seconds is not short
    assert not policy.short


def test_no_claim_while_stopping_nor_before_the_next_poll_after_a_short_claim():
    store = SimpleNamespace(limited=frozenset())  # the last claim found no limited queue
    policy = ClaimPolicy(store, (), slots=1)
    assert policy.wanted(0.0, running=0, stopping=True) == 0
    policy.claimed([], claim=1, now=10.0, at=Instant(1e6, 10.0, "d"), poll=5.0)
    assert policy.claim_at == 15.0 and policy.wanted(14.9, 0, False) == 0 and policy.wanted(15.0, 0, False) == 1
    assert policy.next_due(12.0, {}, stopping=False) == 15.0  # a free slot waits for the poll
    assert policy.next_due(12.0, {}, stopping=True) == float("inf")
    policy.claim_now()  # a wake-up
    assert policy.wanted(12.0, 0, False) == 1


def test_a_claim_that_got_what_it_asked_for_claims_again_at_once():
    policy = ClaimPolicy(None, (), slots=1)
    policy.claimed([job("a")], claim=1, now=10.0, at=None, poll=5.0)
    assert list(policy.reserve) == [job("a")] and policy.claim_at == 0.0


def test_the_reserve_goes_back_once_every_slot_is_busy_hold_seconds():
    policy = ClaimPolicy(None, (), slots=2)
    policy.short = True
    policy.reserve.extend([job("a"), job("b")])
    assert policy.held_back(10.0, running(10.0 - 2 * HOLD, 10.0 - HOLD / 2)) == []  # one is still young
    assert policy.held_back(10.0, running(10.0 - 2 * HOLD)) == []  # a slot is free: it will start one
    assert policy.next_due(10.0, running(9.0, 9.995), stopping=False) == pytest.approx(9.995 + HOLD)
    assert policy.held_back(10.0, running(10.0 - 2 * HOLD, 10.0 - 3 * HOLD)) == [job("a"), job("b")]
    assert not policy.short  # long jobs: no more claiming ahead


def test_a_job_of_a_limited_queue_that_ends_makes_the_next_claim_at_once():
    policy = ClaimPolicy(SimpleNamespace(), (), slots=1)
    policy.claimed([], claim=0, now=0.0, at=None, poll=1.0, limited=frozenset({"slow"}))  # found limited
    policy.started(job("a", "slow"))
    policy.started(job("b", "fast"))
    policy.claim_at = 99.0
    policy.ended("b", 1.0)
    assert policy.claim_at == 99.0
    policy.ended("a", 1.0)
    assert policy.claim_at == 0.0


def test_a_rate_limit_that_frees_a_place_before_the_poll_brings_the_claim_forward():
    store = SimpleNamespace(rate_room_at=lambda queues, at: at.wall + 0.5)
    policy = ClaimPolicy(store, ("slow",), slots=1)
    policy.claimed([], claim=1, now=10.0, at=Instant(1e6, 10.0, "d"), poll=5.0, limited=frozenset({"slow"}))
    assert policy.claim_at == pytest.approx(10.5)

    def down(queues, at):
        raise DatabaseError("the read failed")

    store.rate_room_at = down  # the exchange is done: the read failing costs only the poll's wait
    policy.claimed([], claim=1, now=10.0, at=Instant(1e6, 10.0, "d"), poll=5.0)
    assert policy.claim_at == 15.0


# -- the ledger -------------------------------------------------------------------------------------

def test_the_ledger_is_due_at_once_for_a_give_back_and_an_end_unless_batching():
    ledger = Ledger()
    assert ledger.due(5.0, batching=False) == float("inf") and not ledger
    ledger.ended.append(("a", None, 1e6, 4.0))
    assert ledger.due(5.0, batching=False) == 5.0
    assert ledger.due(5.0, batching=True) == 4.0 + RECORD_WITHIN
    ledger.groups["b"] = SimpleNamespace(started=4.5)
    assert ledger.due(5.0, batching=True) == min(4.0 + RECORD_WITHIN, 4.5 + RECORD_AFTER)
    ledger.release.append("c")
    assert ledger.due(5.0, batching=True) == 5.0 and ledger.known() == {"a", "c"}


# -- output ---------------------------------------------------------------------------------------

def test_new_output_is_due_output_every_seconds_after_the_last_record():
    quiet = SimpleNamespace(flushed_at=1.0, unflushed=lambda: False)
    talking = SimpleNamespace(flushed_at=2.0, unflushed=lambda: True)
    assert output_due(quiet) == float("inf") and output_due(talking) == 2.0 + OUTPUT_EVERY
    assert next_output_due({"q": quiet, "t": talking}) == 2.0 + OUTPUT_EVERY
    assert next_output_due({}) == float("inf")


# -- health -----------------------------------------------------------------------------------------

def test_the_heartbeat_comes_every_interval_or_as_the_watchdog_needs():
    config = {"heartbeat-interval": 5.0, "stale-after": 30.0}
    assert Health(Notifier(), Watch(), Clock()).interval(config) == 5.0
    health = Health(Notifier(watchdog_interval=2.0), Watch(), Clock())
    assert health.interval(config) == 2.0
    assert health.beat_due(0.0, reserved=False, config=config)
    health.beaten(0.0, config)
    assert health.next_beat == 2.0 and not health.beat_due(1.0, reserved=False, config=config)
    assert health.beat_due(1.0, reserved=True, config=config)  # no beat yet: none is fresh


def test_a_beat_is_fresh_for_half_of_stale_after_and_a_late_one_gives_the_others_grace():
    config = {"heartbeat-interval": 1.0, "stale-after": 10.0}
    clock, watch = Clock(100.0), Watch()
    health = Health(Notifier(), watch, clock)
    health.note_gap(Instant(1e6, 100.0, "d"), config)
    assert health.fresh(104.9, config) and not health.fresh(105.0, config)
    clock.now = 102.9  # within 2 x interval + 1 s: no grace
    health.note_gap(Instant(1e6 + 2.9, 102.9, "d"), config)
    assert watch.resumed == []
    clock.now = 106.0  # held up for more: the others get stale-after from now
    health.note_gap(Instant(1e6 + 6.0, 106.0, "d"), config)
    assert watch.resumed == [106.0]


def test_the_status_line_says_idle_running_or_draining_with_the_counts():
    summary = Stats(done=3, failed=1, recovered=2).summary()
    assert summary == "3 done, 1 failed, 2 recovered"
    assert status_line([], 4, False, summary) == "idle, 4 slot(s); 3 done, 1 failed, 2 recovered"
    assert status_line(["a", "b"], 4, False, "x") == "running 2/4 job(s): a, b; x"
    assert status_line([str(i) for i in range(6)], 6, True, "x") == "draining 6 job(s): 0, 1, 2, 3, 4, ...; x"


# -- outages ----------------------------------------------------------------------------------------

def test_an_outage_pings_the_watchdog_only_while_unavailable_and_waits_db_retry():
    clock, notifier, watch = Clock(50.0), Notifier(), Watch()
    outage = Outage(notifier, watch, clock)
    assert outage.waiting(50.0) is None
    outage.failed(DatabaseError("refuses writes"), held=0)
    assert notifier.pings == 0 and outage.failing_since == 50.0 and outage.in_doubt
    outage.failed(DatabaseUnavailable("the server is down"), held=2)
    assert notifier.pings == 1 and outage.failing_since == 50.0
    assert outage.retry_later() == DB_RETRY
    assert outage.waiting(50.5) == pytest.approx(DB_RETRY - 0.5) and outage.waiting(50.0 + DB_RETRY) is None
    clock.now = 62.4
    assert outage.status(1, 2) == "database unavailable for 12 s; 1 job(s) running and 2 result(s) held"


def test_the_end_of_an_outage_gives_the_others_their_grace_once():
    clock, watch = Clock(50.0), Watch()
    outage = Outage(Notifier(), watch, clock)
    outage.works(lambda: Instant(1e6, clock.now, "d"))  # no outage: nothing to say
    outage.failed(DatabaseUnavailable("down"), held=0)
    outage.beat(Instant(1e6, 51.0, "d"))  # a heartbeat during the outage: the grace, at once
    clock.now = 53.0
    outage.works(lambda: Instant(1e6, clock.now, "d"))
    assert watch.resumed == [51.0] and outage.failing_since is None


# -- duties -----------------------------------------------------------------------------------------

@pytest.fixture
def worker(tmp_path):
    store = SqliteStore(str(tmp_path / "q.db"))
    w = make_worker(store, Clock(), name="parts")
    yield w
    stop_runner(w.runner)
    store.close()


def test_the_loop_runs_its_duties_in_lists_in_order(worker):
    assert [type(d) for d in worker.at_heartbeat] == [RecoveryDuty]
    assert [type(d) for d in worker.before_exchange] == [Cancels]
    assert [type(d) for d in worker.periodic] == [Retention, Schedules]
    ran = []
    duty = SimpleNamespace(due=lambda now: now >= 1.0, run=ran.append, wake_at=lambda: 7.0)
    idle = SimpleNamespace(due=lambda now: False, run=ran.append, wake_at=lambda: float("inf"))
    run_due([duty, idle, duty], 0.5)
    run_due([duty, idle, duty], 1.5)
    assert ran == [1.5, 1.5] and wake_at([idle, duty]) == 7.0 and wake_at([]) == float("inf")


def test_retention_is_due_at_once_then_every_half_of_the_shortest_keep_at_most_every_minute(worker):
    retention = Retention(worker.store, lambda: worker.worker_id, lambda: worker.config, worker.now)
    assert retention.due(0.0) and retention.wake_at() == float("inf")
    worker.store.set_setting("keep-completed", "10")
    worker.config = worker.store.settings()
    retention.run(worker.monotonic())
    assert not retention.due(worker.monotonic() + 4.9) and retention.due(worker.monotonic() + 5.0)
    worker.store.set_setting("keep-completed", "1d")
    worker.config = worker.store.settings()
    retention.run(worker.monotonic())
    assert not retention.due(worker.monotonic() + RETENTION_EVERY - 0.1)


def test_schedules_look_again_within_check_every(worker):
    schedules = Schedules(worker.store, worker.claims, worker.now)
    assert schedules.due(0.0)
    schedules.run(worker.monotonic())
    assert schedules.wake_at() == worker.monotonic() + CHECK_EVERY
    assert not schedules.due(worker.monotonic() + CHECK_EVERY - 0.01)


def test_cancels_are_looked_for_only_when_asked_and_jobs_are_held(worker):
    cancels = worker.cancels
    assert not cancels.due(0.0)  # asked for, but nothing held
    worker.claims.reserve.append(job("a"))
    assert cancels.due(0.0)
    cancels.run(0.0)  # no cancel requested: the job stays
    assert list(worker.claims.reserve) == [job("a")] and not cancels.due(0.0)
    cancels.requested()
    assert cancels.due(0.0)
    worker.claims.reserve.clear()


def test_the_recovery_duty_runs_at_each_heartbeat_and_counts_what_it_recovered(worker):
    duty = worker.at_heartbeat[0]
    assert duty.due(0.0) and duty.wake_at() == float("inf")
    duty.run(worker.monotonic())
    assert worker.stats.recovered == worker.recovery.recovered == 0
