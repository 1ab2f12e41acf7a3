"""The exchanger on its own (queuectl.worker.exchange): the worker's parts it takes (a ledger, the running jobs,
a claim policy, an outage, stats) and a real store on both engines; no Worker. What it records and claims,
the lines it says with the store's decisions, when it is due, and how it settles an exchange whose reply was
lost."""

from __future__ import annotations

import pytest

from queuectl.domain.clock import Instant
from queuectl.domain.errors import DatabaseError
from queuectl.domain.models import JobState
from queuectl.host.runner import RunResult
from queuectl.worker.claims import ClaimPolicy
from queuectl.worker.exchange import RUN_LOST, Exchanger
from queuectl.worker.health import Stats
from queuectl.worker.ledger import RECORD_WITHIN, Ledger
from queuectl.worker.outage import Outage
from support.engines import BOTH_ENGINES
from support.worker_steps import NOW, add, register

pytestmark = BOTH_ENGINES

MONO = 500.0  # the tests' monotonic clock


class Lossy:
    """A store whose next exchange commits and then fails as a lost reply does (DatabaseError)."""

    def __init__(self, store):
        self.store, self.lose = store, False

    def exchange(self, *args, **kw):
        done = self.store.exchange(*args, **kw)
        if self.lose:
            self.lose = False
            raise DatabaseError("connection lost: the reply never came")
        return done

    def __getattr__(self, name):
        return getattr(self.store, name)


def parts(store, slots: int = 2):
    """An Exchanger of `store` for a registered worker, with the parts it takes; returned with them."""
    ledger, running, stats = Ledger(), {}, Stats()
    claims = ClaimPolicy(store, (), slots)
    outage = Outage(notifier=None, watch=None, monotonic=lambda: MONO)
    exchanger = Exchanger(store, (), ledger, running, claims, outage, stats, lambda: Instant(NOW + 1, MONO, None))
    exchanger.worker_id = register(store, slots=slots)
    return exchanger


def config(store, **settings) -> dict:
    for name, value in settings.items():
        store.set_setting(name, value)
    return store.settings()


class Silent:
    """A running job (as the runner holds it) that has written nothing since its last record."""

    def unflushed(self) -> bool:
        return False


def end(exchanger, job_id: str, result: RunResult) -> None:
    """What the worker does when a job it started ends: out of the running jobs, into the ledger."""
    exchanger.running.pop(job_id, None)
    exchanger.ledger.ended.append((job_id, result, NOW + 1, MONO))


def claimed_and_started(exchanger, settings: dict, *job_ids: str) -> None:
    """Claim the jobs into the reserve and note them started as the worker does (attempt 1 of their retries)."""
    exchanger.run(MONO, len(job_ids), settings)
    for job in list(exchanger.claims.reserve):
        exchanger.claims.reserve.remove(job)
        exchanger.running[job.id] = Silent()
        exchanger.ledger.started(job.id, None, NOW + 1)
        exchanger.started(job.id, job.attempts + 1, 3)
    assert sorted(job_ids) == sorted(exchanger.ledger.starts)


def test_a_run_claims_into_the_reserve_and_records_the_ends_it_holds(store):
    add(store, id="ok")
    add(store, id="bad", max_retries=3)
    exchanger = parts(store)
    settings = config(store)
    claimed_and_started(exchanger, settings, "ok", "bad")
    end(exchanger, "ok", RunResult(0, None, b"out", b"", 0.1))
    end(exchanger, "bad", RunResult(3, "exit code 3", b"", b"", 0.1))
    exchanger.run(MONO, 0, settings)
    assert [store.get_job(j).state for j in ("ok", "bad")] == [JobState.COMPLETED, JobState.FAILED]
    assert (exchanger.stats.done, exchanger.stats.failed) == (1, 1)
    assert not exchanger.ledger and not exchanger.attempts  # recorded: forgotten


def test_a_failure_is_said_once_with_the_backoff_the_store_chose(store, worker_log):
    add(store, id="bad", max_retries=3)
    add(store, id="last", max_retries=0)
    exchanger = parts(store)
    settings = config(store, **{"backoff-base": "7"})
    claimed_and_started(exchanger, settings, "bad", "last")
    exchanger.attempts["last"] = (1, 0)
    end(exchanger, "bad", RunResult(3, "exit code 3", b"", b"", 0.1))
    end(exchanger, "last", RunResult(None, "killed by signal 9", b"", b"", 0.1))
    exchanger.run(MONO, 0, settings)
    assert "job bad: retry 1/3 in 7 s (exit code 3)" in worker_log
    assert "job last: dead: killed by signal 9 (attempt 1 of 1)" in worker_log
    assert store.get_job("bad").run_at == NOW + 1 + 7


def test_ends_wait_for_the_ends_that_follow_only_while_short_jobs_run_and_no_stop_came(store):
    exchanger = parts(store)
    end(exchanger, "a", RunResult(0, None, b"", b"", 0.1))
    exchanger.claims.short = True
    assert exchanger.due(MONO, stopping=False) == MONO  # no job runs: nothing to batch with
    exchanger.running["b"] = Silent()
    assert exchanger.batching(stopping=False) and not exchanger.batching(stopping=True)
    assert exchanger.due(MONO, stopping=False) == MONO + RECORD_WITHIN
    assert exchanger.due(MONO, stopping=True) == MONO
    exchanger.claims.short = False  # a long job ran last
    assert exchanger.due(MONO, stopping=False) == MONO


def test_a_start_recorded_first_counts_the_attempt_before_the_job_runs(store):
    add(store, id="a")
    exchanger = parts(store)
    settings = config(store)
    exchanger.run(MONO, 1, settings)
    [job] = exchanger.claims.reserve
    assert store.get_job("a").attempts == 0
    exchanger.record_start("a", NOW + 1, settings)
    assert (store.get_job("a").attempts, store.get_job("a").started_at) == (1, NOW + 1)


def test_a_lost_reply_is_settled_by_the_next_run_claims_given_back_and_ends_kept(store):
    add(store, id="ran")
    add(store, id="more")
    lossy = Lossy(store)
    exchanger = parts(lossy)
    settings = config(store)
    claimed_and_started(exchanger, settings, "ran")
    end(exchanger, "ran", RunResult(0, None, b"", b"", 0.1))
    lossy.lose = True
    with pytest.raises(DatabaseError):
        exchanger.run(MONO, 1, settings)  # committed: "ran" completed, "more" claimed; the reply lost
    assert exchanger.outage.in_doubt and exchanger.ledger.ended  # still held: it may not have committed
    assert store.get_job("more").state == JobState.PROCESSING
    exchanger.run(MONO, 0, settings)
    assert not exchanger.outage.in_doubt
    assert store.get_job("more").state == JobState.PENDING  # never seen here: given back
    assert store.get_job("ran").state == JobState.COMPLETED and exchanger.stats.done == 1  # its end kept


def test_a_started_job_the_worker_knows_nothing_of_ends_failed_as_a_lost_run(store):
    add(store, id="gone", max_retries=0)
    exchanger = parts(store)
    settings = config(store)
    claimed_and_started(exchanger, settings, "gone")
    exchanger.run(MONO, 0, settings)  # its start recorded
    assert store.get_job("gone").started_at == NOW + 1
    exchanger.running.clear()  # it ended here, and the database went back in time to before its end
    exchanger.attempts.clear()
    exchanger.outage.in_doubt = True
    exchanger.run(MONO, 0, settings)  # settles: the end it makes is recorded by the next run
    exchanger.run(MONO, 0, settings)
    job = store.get_job("gone")
    assert (job.state, job.last_error) == (JobState.DEAD, RUN_LOST)
