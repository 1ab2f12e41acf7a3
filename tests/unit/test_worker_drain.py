"""A worker's stop on its own (queuectl.worker.drain): the parts it acts on (a real runner with real jobs, a
ledger, a claim policy, a real store) and no Worker. The first request announced, recorded once, the reserve
given back; the second stops the running jobs to be put back; what it waits for said at once and then every
DRAIN_SAY_EVERY seconds; how the worker ends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from queuectl.domain.models import DRAIN_SAY_EVERY
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.drain import Drain
from queuectl.worker.ledger import Ledger
from support.inprocess import Clock, Notifier
from support.worker_steps import NOW, register

MONO = Clock.START  # the runner's monotonic clock (the `clock` fixture's)


@pytest.fixture
def drain(store, runner):
    claims = ClaimPolicy(store, (), 2)
    return Drain(store, runner, Ledger(), claims, Notifier())


def test_the_first_request_is_announced_and_recorded_once_and_gives_back_the_reserve(store, drain, runner,
                                                                                     worker_log):
    worker_id = register(store, "w1")
    runner.start("running", "sleep 30")
    drain.claims.reserve.extend([SimpleNamespace(id="ahead-1"), SimpleNamespace(id="ahead-2")])
    assert drain.announce(1, 0) == 1
    assert worker_log == ["stop requested: draining 1 running job(s); a second signal stops them"]
    assert drain.notifier.stopping_said == ["draining 1 job(s)"]
    drain.begin(worker_id, lambda: NOW)
    drain.begin(worker_id, lambda: NOW + 5)  # each turn: recorded once, from the first
    assert store.worker_by_name("w1").draining_since == NOW
    assert not drain.claims.reserve and drain.ledger.release == ["ahead-1", "ahead-2"]
    assert list(runner.running) == ["running"] and not drain.ledger.forced  # it runs to its end
    assert drain.ended(1) == "drained"


def test_a_second_request_stops_the_running_jobs_to_be_put_back(drain, runner, worker_log):
    runner.start("a", "sleep 30")
    runner.start("b", "sleep 30")
    drain.announce(1, 0)
    assert drain.announce(2, 1) == 2
    assert worker_log[1:] == ["second stop request: terminating 2 running job(s) and requeueing them"]
    assert drain.ledger.forced == {"a", "b"} and drain.ended(2) == "forced"
    ended = []
    while runner.running:
        ended += runner.wait(5)[0]
    assert sorted((key, result.error) for key, result in ended) == [
        ("a", "killed by signal 15 (SIGTERM)"), ("b", "killed by signal 15 (SIGTERM)")]
    drain.announce(3, 2)  # a third: nothing more to stop
    assert drain.ledger.forced == {"a", "b"}


def test_a_second_request_with_no_job_running_forces_nothing(drain):
    drain.announce(2, 0)
    assert drain.notifier.stopping_said == ["draining 0 job(s)"]
    assert not drain.ledger.forced and drain.ended(2) == "drained"
    assert drain.ended(0) == "burst"  # no request: out of work


def test_what_the_drain_waits_for_is_said_at_once_then_every_few_seconds(drain, runner, worker_log):
    drain.say(MONO)  # nothing runs: nothing to say
    runner.start("j-1", "sleep 30")
    drain.say(MONO + 2)
    drain.say(MONO + 2 + DRAIN_SAY_EVERY - 0.5)
    drain.say(MONO + 2 + DRAIN_SAY_EVERY)
    assert worker_log == ["waiting for 1 running job: j-1 (2 s)",
                             f"waiting for 1 running job: j-1 ({2 + DRAIN_SAY_EVERY:g} s)"]
