"""The worker's duties on their own (queuectl.worker.duties): each built from what it takes (a real SQLite store, a
real runner with real jobs, a claim policy, a drain, stats; the worker's id, settings and clocks as callables) and
no Worker. What each does and returns, when it is due again, what it logs, and that a failing store's error
reaches the loop with nothing done."""

from __future__ import annotations

import subprocess

import pytest

from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import JobState
from queuectl.domain.recurrence import parse_rule
from queuectl.host import procs
from queuectl.store import PURGE_BATCH
from queuectl.store.request import Exchange
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.drain import Drain
from queuectl.worker.duties.cancels import Cancelled, Cancels
from queuectl.worker.duties.recovery import SPAWN_SETTLE, Recovery, RecoveryDuty
from queuectl.worker.duties.retention import LOG_EVERY, Retention
from queuectl.worker.duties.schedules import CHECK_EVERY, Schedules
from queuectl.worker.health import Stats
from queuectl.worker.ledger import Ledger
from support.inprocess import Clock
from support.worker_steps import NOW, add, local_worker, new_job, register

MONO = Clock.START  # the tests' monotonic clock at NOW, the runner's too (the `clock` fixture's)


class Clocks:
    """The worker's clocks, moved only when told (`at`): NOW and MONO plus `t` seconds."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> Instant:
        return Instant(NOW + self.t, MONO + self.t, procs.clock_domain())


class Failing:
    """`store` with one method failing as a lost connection does (DatabaseError)."""

    def __init__(self, store, method: str):
        self.store, self.method = store, method

    def __getattr__(self, name):
        if name == self.method:
            def fail(*args, **kw):
                raise DatabaseError("connection lost")
            return fail
        return getattr(self.store, name)


def reaped(runner) -> dict:
    """Wait for every running job to end; return each one's error."""
    errors = {}
    while runner.running:
        errors.update((key, result.error) for key, result in runner.wait(5)[0])
    return errors


# -- cancels ----------------------------------------------------------------------------------------

def cancels_of(store, runner, worker_id) -> Cancels:
    """Cancels for the worker whose id `worker_id()` gives, with its claim policy (one slot) and drain."""
    claims = ClaimPolicy(store, (), 1)
    return Cancels(store, worker_id, runner, claims, Drain(store, runner, Ledger(), claims, None))


def held(store, runner, cancels: Cancels, worker_id: int, *job_ids: str) -> None:
    """Claim the jobs for `worker_id`: the first runs (`sleep 30`), the others wait in the reserve."""
    jobs = store.exchange(worker_id, Exchange(claim=len(job_ids)), (), NOW).jobs
    assert [job.id for job in jobs] == list(job_ids)
    runner.start(jobs[0].id, "sleep 30")
    cancels.claims.reserve.extend(jobs[1:])


def test_a_cancel_stops_the_running_job_by_sigterm_and_gives_back_the_claimed_one(store, runner, worker_log):
    add(store, id="run", priority=1)
    add(store, id="ahead")
    add(store, id="kept")
    w = register(store)
    cancels = cancels_of(store, runner, lambda: w)
    held(store, runner, cancels, w, "run", "ahead", "kept")
    store.cancel(["run", "ahead"], NOW + 1)
    assert cancels.run(MONO) == Cancelled(stopped=["run"], given_back=["ahead"])
    assert [job.id for job in cancels.claims.reserve] == ["kept"] and cancels.drain.ledger.release == ["ahead"]
    assert runner.running["run"].kill_at == MONO + runner.kill_grace  # SIGKILL after the grace, if it lives
    assert worker_log == ["job run: cancel requested, stopping its process group"]
    cancels.requested()
    assert cancels.run(MONO) == Cancelled(stopped=[], given_back=[])  # the same run is not sent it again
    assert reaped(runner) == {"run": "killed by signal 15 (SIGTERM)"}


def test_a_run_started_again_after_a_cancel_is_stopped_by_the_next_look(store, runner):
    add(store, id="run")
    w = register(store)
    cancels = cancels_of(store, runner, lambda: w)
    held(store, runner, cancels, w, "run")
    store.cancel(["run"], NOW + 1)
    assert cancels.run(MONO).stopped == ["run"]
    assert reaped(runner) == {"run": "killed by signal 15 (SIGTERM)"}
    runner.start("run", "sleep 30")  # a new run under the job's id, its cancel still requested in the store
    cancels.requested()
    assert cancels.run(MONO).stopped == ["run"]
    assert reaped(runner) == {"run": "killed by signal 15 (SIGTERM)"}


def test_cancels_are_looked_for_only_when_asked_and_jobs_are_held(store, runner):
    add(store, id="run")
    w = register(store)
    cancels = cancels_of(store, runner, lambda: w)
    assert not cancels.due(MONO)  # asked for at start, but nothing held
    held(store, runner, cancels, w, "run")
    assert cancels.due(MONO)
    assert cancels.run(MONO) == Cancelled([], [])  # no cancel requested: the job runs on
    assert list(runner.running) == ["run"] and not cancels.due(MONO)
    cancels.requested()  # a heartbeat or a wake-up
    assert cancels.due(MONO)


def test_cancels_ask_for_the_worker_id_at_each_look(store, runner):
    add(store, id="run")
    w = register(store, "w1")
    ids = [register(store, "w2")]  # the id this worker had when the duty was built
    cancels = cancels_of(store, runner, lambda: ids[-1])
    held(store, runner, cancels, w, "run")
    store.cancel(["run"], NOW + 1)
    assert cancels.run(MONO) == Cancelled([], [])  # w2 holds no job
    ids.append(w)  # registered again, under the id that holds the job
    cancels.requested()
    assert cancels.run(MONO).stopped == ["run"]


def test_a_failing_look_for_cancels_raises_and_stops_nothing(store, runner):
    add(store, id="run", priority=1)
    add(store, id="ahead")
    w = register(store)
    cancels = cancels_of(Failing(store, "cancel_requests"), runner, lambda: w)
    held(store, runner, cancels, w, "run", "ahead")
    store.cancel(["run", "ahead"], NOW + 1)
    with pytest.raises(DatabaseError):
        cancels.run(MONO)
    assert [job.id for job in cancels.claims.reserve] == ["ahead"] and not cancels.drain.ledger.release
    assert runner.running["run"].kill_at is None


# -- retention --------------------------------------------------------------------------------------

def cancelled(store, count: int) -> list[str]:
    """Enqueue `count` jobs and cancel them at NOW (finished, to be kept keep-cancelled); return their ids."""
    jobs = [new_job(id=f"c{i}") for i in range(count)]
    store.enqueue(jobs, NOW)
    store.cancel([job.id for job in jobs], NOW)
    return [job.id for job in jobs]


def retention_of(store, worker_id: int, clocks: Clocks, **keep) -> tuple[Retention, list[dict]]:
    """Retention for `worker_id` with the store's settings and `keep` (keep-* in seconds); returned with the
    settings in force, the last of a list (a reload appends), which it reads at each pass."""
    settings = [{**store.settings(), **{f"keep-{state}": age for state, age in keep.items()}}]
    return Retention(store, lambda: worker_id, lambda: settings[-1], clocks), settings


def test_a_pass_deletes_the_expired_jobs_says_so_and_is_due_again_after_half_the_shortest_keep(store, worker_log):
    cancelled(store, 3)
    clocks = Clocks()
    retention, settings = retention_of(store, register(store), clocks, cancelled=10.0)
    assert retention.due(0.0) and retention.wake_at() == float("inf")
    clocks.t = 5
    assert retention.run(MONO + 5) == 0  # kept 10 s: none expired yet
    assert not retention.due(MONO + 9.9) and retention.due(MONO + 10)
    clocks.t = 11
    assert retention.run(MONO + 11) == 3
    assert store.list_jobs() == [] and worker_log == ["retention: deleted 3 expired job(s)"]
    settings.append({**settings[-1], "keep-cancelled": 2.0})  # reloaded: in force at the next pass
    assert retention.run(MONO + 11) == 0
    assert not retention.due(MONO + 11.9) and retention.due(MONO + 12)


def test_a_pass_deletes_nothing_while_another_worker_holds_the_retention_lease(store):
    cancelled(store, 2)
    clocks = Clocks()
    clocks.t = 100
    retention, _ = retention_of(store, register(store, "w1"), clocks, cancelled=10.0)
    holder = register(store, "w2")
    assert store.take_lease("retention", holder, clocks(), 60.0)
    assert retention.run(MONO + 100) == 0
    assert len(store.list_jobs()) == 2 and not retention.due(MONO + 100)  # the next pass waits its time
    holders, _ = retention_of(store, holder, clocks, cancelled=10.0)
    assert holders.run(MONO + 100) == 2  # the holder's pass renews the lease in its name


def test_a_full_batch_brings_the_next_pass_at_once_and_the_log_says_deletions_every_few_seconds(store, worker_log):
    cancelled(store, PURGE_BATCH + 1)
    clocks = Clocks()
    clocks.t = 100
    retention, _ = retention_of(store, register(store), clocks, cancelled=10.0)
    assert retention.run(MONO + 100) == PURGE_BATCH
    assert retention.due(MONO + 100)  # a backlog: the next turn
    assert retention.run(MONO + 100) == 1
    assert not retention.due(MONO + 100)
    assert worker_log == [f"retention: deleted {PURGE_BATCH} expired job(s)"]  # the 1 waits LOG_EVERY
    clocks.t += LOG_EVERY
    assert retention.run(MONO + clocks.t) == 0
    assert worker_log[1:] == ["retention: deleted 1 expired job(s)"] and store.list_jobs() == []


def test_a_failing_pass_raises_and_deletes_nothing(store):
    cancelled(store, 2)
    clocks = Clocks()
    clocks.t = 100
    retention, _ = retention_of(Failing(store, "purge"), register(store), clocks, cancelled=10.0)
    with pytest.raises(DatabaseError):
        retention.run(MONO + 100)
    assert len(store.list_jobs()) == 2


# -- schedules --------------------------------------------------------------------------------------

@pytest.fixture
def every_10s(store):
    """A schedule firing every 10 s, added at NOW (a multiple of 10: its first slot is NOW + 10)."""
    store.add_schedule("tick", parse_rule(None, "10s", "UTC"), {"command": "true"}, "skip", NOW)


def schedules_of(store, clocks: Clocks) -> Schedules:
    """Schedules with a claim policy whose next claim waits for a poll far off (claim_at 1e9)."""
    claims = ClaimPolicy(store, (), 1)
    claims.claim_at = 1e9
    return Schedules(store, claims, clocks)


def test_a_due_slot_fires_once_and_its_run_is_claimed_at_once(store, every_10s, worker_log):
    clocks = Clocks()
    schedules = schedules_of(store, clocks)
    assert schedules.due(0.0)
    assert schedules.run(MONO) == [] and schedules.claims.claim_at == 1e9  # nothing due: no claim
    assert schedules.wake_at() == MONO + CHECK_EVERY
    clocks.t = 10
    [fired] = schedules.run(MONO + 10)
    assert (fired.schedule, fired.outcome, fired.job_id) == ("tick", "added", "tick@1970-01-12T13:46:50Z")
    assert [job.id for job in store.list_jobs()] == [fired.job_id] and schedules.claims.claim_at == 0.0
    assert worker_log == [f"schedule tick: slot 1970-01-12T13:46:50.000+00:00: enqueued {fired.job_id}"]
    assert schedules.run(MONO + 10) == []  # fired once


def test_the_next_look_comes_at_the_next_slot_when_it_is_nearer_than_check_every(store, every_10s):
    clocks = Clocks()
    schedules = schedules_of(store, clocks)
    clocks.t = 9.5
    assert schedules.run(MONO + 9.5) == []
    assert schedules.wake_at() == pytest.approx(MONO + 10)
    assert not schedules.due(MONO + 9.99) and schedules.due(MONO + 10)


def test_a_slot_whose_last_run_has_not_ended_is_skipped_and_claims_nothing_early(store, every_10s, worker_log):
    clocks = Clocks()
    schedules = schedules_of(store, clocks)
    clocks.t = 10
    [first] = schedules.run(MONO + 10)
    schedules.claims.claim_at = 1e9
    clocks.t = 20
    [skipped] = schedules.run(MONO + 20)
    assert (skipped.outcome, skipped.holder) == ("skipped", first.job_id)
    assert schedules.claims.claim_at == 1e9 and [job.id for job in store.list_jobs()] == [first.job_id]
    assert worker_log[-1] == (f"schedule tick: slot 1970-01-12T13:47:00.000+00:00 skipped: job {first.job_id},"
                              " which holds the runs' key, has not ended (overlap skip)")


def test_a_failing_look_raises_fires_nothing_and_stays_due(store, every_10s):
    clocks = Clocks()
    clocks.t = 10
    schedules = schedules_of(Failing(store, "fire_schedules"), clocks)
    with pytest.raises(DatabaseError):
        schedules.run(MONO + 10)
    assert store.list_jobs() == [] and schedules.due(MONO + 10)


# -- recovery ---------------------------------------------------------------------------------------

def lost_worker(store) -> int:
    """Register a worker of this host whose process is gone, holding job "x" claimed and not started."""
    add(store, id="x")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    lost = local_worker(store, "lost", pid=gone.pid)
    store.exchange(lost, Exchange(claim=1), [], NOW)
    return lost


def test_the_recovery_duty_recovers_a_dead_workers_job_and_counts_it(store, worker_log):
    lost_worker(store)
    clocks, stats = Clocks(), Stats()
    watcher = register(store, "watcher")
    duty = RecoveryDuty(Recovery(store), lambda: watcher, store.settings, clocks, stats)
    assert duty.due(0.0) and duty.wake_at() == float("inf")
    assert duty.run(MONO) == 0  # dead just now: its job may still be in exec(2)
    assert store.get_job("x").state == JobState.PROCESSING and duty.recovery.held == 1
    clocks.t = SPAWN_SETTLE
    assert duty.run(MONO + SPAWN_SETTLE) == 1
    assert (store.get_job("x").state, stats.recovered, duty.recovery.held) == (JobState.FAILED, 1, 0)
    assert worker_log[-1] == "recovered job x from dead worker 'lost' (worker lost): retry scheduled"
    assert store.worker_by_name("lost") is None
    assert duty.run(MONO + SPAWN_SETTLE) == 0 and stats.recovered == 1  # nothing more: the count stays


def test_the_recovery_duty_asks_for_the_worker_id_at_each_sweep(store):
    lost = lost_worker(store)
    clocks, ids = Clocks(), [lost]  # as if this were the lost worker's id: a sweep never judges itself
    duty = RecoveryDuty(Recovery(store), lambda: ids[-1], store.settings, clocks, Stats())
    clocks.t = SPAWN_SETTLE
    assert duty.run(MONO + SPAWN_SETTLE) == 0 and duty.recovery.held == 0
    ids.append(register(store, "watcher"))
    duty.run(MONO + SPAWN_SETTLE)  # judged dead from now
    clocks.t = 2 * SPAWN_SETTLE
    assert duty.run(MONO + 2 * SPAWN_SETTLE) == 1


def test_a_failing_sweep_raises_and_recovers_nothing(store):
    lost_worker(store)
    stats = Stats()
    watcher = register(store, "watcher")
    duty = RecoveryDuty(Recovery(Failing(store, "workers")), lambda: watcher, store.settings, Clocks(), stats)
    with pytest.raises(DatabaseError):
        duty.run(MONO)
    assert store.get_job("x").state == JobState.PROCESSING and stats.recovered == 0
