"""Starting claimed jobs on their own (queuectl.worker.starts): a real runner and real jobs, a real store on both
engines, the parts the starter asks (claim policy, health, outage, exchanger, ledger), no Worker. Jobs start in
free slots with their environment; none while the heartbeat is stale, the database fails or a stop came; a
last attempt's start is recorded first, and a failure to record it starts nothing."""

from __future__ import annotations

import pytest

from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.exchange import Exchanger
from queuectl.worker.health import Health, Stats
from queuectl.worker.ledger import Ledger
from queuectl.worker.outage import Outage
from queuectl.worker.starts import Starter
from support.engines import BOTH_ENGINES
from support.inprocess import Clock, Notifier
from support.worker_steps import NOW, add, register

pytestmark = BOTH_ENGINES

MONO = Clock.START  # the monotonic clock of the runner and of every part (the `clock` fixture's, never moved)


class FailingRecords:
    """A store whose exchanges fail (a last attempt's start cannot be recorded first)."""

    def __init__(self, store):
        self.store = store

    def exchange(self, *args, **kw):
        raise DatabaseError("connection lost")

    def __getattr__(self, name):
        return getattr(self.store, name)


def starter_of(store, runner, slots: int = 2) -> Starter:
    """A Starter with its parts, for a registered worker whose heartbeat is fresh; the reserve filled by a
    claim of every ready job."""
    claims, ledger, outage = ClaimPolicy(store, (), slots), Ledger(), Outage(Notifier(), None, lambda: MONO)
    now = lambda: Instant(NOW, MONO, None)  # noqa: E731
    exchange = Exchanger(store, (), ledger, runner.running, claims, outage, Stats(), now)
    health = Health(Notifier(), None, lambda: MONO)
    health.last_beat = now()
    starter = Starter(runner, claims, ledger, exchange, health, outage, lambda: NOW + 1)
    exchange.worker_id = starter.worker_id = register(store, slots=slots)
    exchange.run(MONO, 10, store.settings())
    return starter


def outputs(runner) -> dict:
    """Wait for every running job to end; return each one's stdout."""
    out = {}
    while runner.running:
        out.update((key, result.stdout.decode()) for key, result in runner.wait(5)[0])
    return out


def test_jobs_start_in_the_free_slots_with_their_environment(store, runner):
    for job_id in ("a", "b", "c"):
        add(store, id=job_id, queue="build", command='echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT $QUEUECTL_QUEUE'
                                                      ' $QUEUECTL_WORKER_ID"')
    starter = starter_of(store, runner)
    starter.start_reserved(MONO, store.settings(), stopping=False)
    assert sorted(runner.running) == ["a", "b"] and [j.id for j in starter.claims.reserve] == ["c"]
    assert starter.ledger.starts == {"a": NOW + 1, "b": NOW + 1}  # recorded by the next exchange
    assert starter.exchange.attempts == {"a": (1, 3), "b": (1, 3)}  # attempt 1 of a job with 3 retries
    assert store.get_job("a").attempts == 0  # not the last attempt: not recorded first
    w = starter.worker_id
    assert outputs(runner) == {"a": f"a 1 build {w}\n", "b": f"b 1 build {w}\n"}


@pytest.mark.parametrize("why", ["stale heartbeat", "database failing", "stopping"])
def test_nothing_starts_while_the_heartbeat_is_stale_the_database_fails_or_a_stop_came(store, runner, why):
    add(store, id="a")
    starter = starter_of(store, runner)
    settings = store.settings()
    now = MONO
    if why == "stale heartbeat":
        now = MONO + settings["stale-after"] / 2
    elif why == "database failing":
        starter.outage.failed(DatabaseUnavailable("cannot connect"), 0)
    starter.start_reserved(now, settings, stopping=why == "stopping")
    assert not runner.running and [j.id for j in starter.claims.reserve] == ["a"]


def test_a_last_attempt_is_recorded_first_and_starts_nothing_when_that_fails(store, runner):
    add(store, id="last", max_retries=0)
    add(store, id="other", max_retries=0)
    starter = starter_of(store, runner)
    starter.start_reserved(MONO, store.settings(), stopping=False)  # both are last attempts: recorded first
    assert sorted(runner.running) == ["last", "other"]
    assert [store.get_job(j).attempts for j in ("last", "other")] == [1, 1]
    outputs(runner)
    add(store, id="third", max_retries=0)
    starter.exchange.run(MONO, 1, store.settings())
    starter.exchange.store = FailingRecords(store)
    with pytest.raises(DatabaseError):
        starter.start_reserved(MONO, store.settings(), stopping=False)
    assert not runner.running and [j.id for j in starter.claims.reserve] == ["third"]  # back at its head
    assert store.get_job("third").attempts == 0
