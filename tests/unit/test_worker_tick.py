"""The worker's hot-path rules, driven one `tick` at a time in-process: a real SQLite store, real job
processes, a monotonic clock the test moves (queuectl.worker's module docstring states the rules).

A claim takes free slots only until a short job has ended; then also the reserve (up to
PREFETCH_PER_SLOT x slots ahead), never more. An end waits at most RECORD_WITHIN while the
worker batches, and is recorded at once otherwise. A claimed job held behind slots busy for HOLD
seconds goes back to the queue. A stop gives back what has not started, with no attempt counted.
"""

from __future__ import annotations

import signal

import pytest

from queuectl import worker as worker_mod
from queuectl.domain.errors import DatabaseUnavailable
from queuectl.domain.models import DRAIN_SAY_EVERY, MOST_NAMED, JobState, waiting_line
from queuectl.store import SqliteStore
from queuectl.worker import HOLD, PREFETCH_PER_SLOT, RECORD_WITHIN
from support.backdoor import behind_queuectls_back
from support.inprocess import make_worker, stop_runner
from support.worker_steps import add


@pytest.fixture
def store(db):
    s = SqliteStore(db)
    s.set_setting("poll-interval", "5")
    yield s
    s.close()


@pytest.fixture
def worker(store, clock):
    w = make_worker(store, clock)
    yield w
    stop_runner(w.runner)


def end_one(w) -> None:
    """Wait (really) for a running job to end, and give its end to the worker at the test clock's time."""
    while True:
        finished, _ = w.runner.wait(None)
        if finished:
            w.note_ended(finished)
            return


def state(store, job_id):
    return store.get_job(job_id).state


def held_by(store, worker) -> int:
    return len(store.worker_jobs(worker.worker_id))


def test_claims_take_free_slots_then_the_reserve_and_never_more(store, clock, worker):
    for i in range(30):
        add(store, id=f"j{i:02}")
    worker.tick()
    assert held_by(store, worker) == 1  # no job has ended yet: no claim ahead
    most = 0
    while worker.stats.done < 30:
        end_one(worker)
        clock.now += 0.001
        worker.tick()
        most = max(most, held_by(store, worker))
        assert most <= worker.slots + PREFETCH_PER_SLOT * worker.slots
    assert most == 1 + PREFETCH_PER_SLOT  # the reserve was used
    assert {j.attempts for j in store.list_jobs(JobState.COMPLETED, limit=50)} == {1}


def test_an_end_waits_at_most_record_within_while_batching_and_is_recorded_at_once_otherwise(store, clock, worker):
    add(store, id="a")
    add(store, id="b")
    add(store, id="long", command="sleep 30")
    worker.tick()  # claims a
    end_one(worker)  # a was short: the next claim takes the reserve, and finds the queue empty after it
    worker.tick()
    assert state(store, "a") == JobState.COMPLETED
    end_one(worker)  # b ended; long starts at the next tick and keeps the slot busy
    wait = worker.tick()
    assert state(store, "b") == JobState.PROCESSING and 0 < wait <= RECORD_WITHIN
    clock.now += RECORD_WITHIN
    worker.tick()
    assert state(store, "b") == JobState.COMPLETED
    worker.claims.short = False  # a long job ran last: nothing to batch with
    worker.runner.stop_all(signal.SIGKILL)
    end_one(worker)
    worker.tick()
    assert state(store, "long") == JobState.FAILED  # recorded at once


def test_a_reserve_held_behind_a_long_job_goes_back_within_hold(store, clock, worker):
    add(store, id="short")
    add(store, id="long", command="sleep 30")
    for i in range(3):
        add(store, id=f"next{i}")
    worker.tick()
    end_one(worker)
    worker.tick()  # claims long + the three behind it; starts long
    assert [state(store, f"next{i}") for i in range(3)] == [JobState.PROCESSING] * 3
    wait = worker.tick()
    assert wait <= HOLD
    clock.now += HOLD + 1e-6
    worker.tick()
    for i in range(3):
        job = store.get_job(f"next{i}")
        assert (job.state, job.attempts, job.worker_id) == (JobState.PENDING, 0, None)
    assert store.run_counts() == {"default": {"completed": 1}}
    assert state(store, "long") == JobState.PROCESSING and store.get_job("long").attempts == 1


def test_a_stop_gives_back_the_reserve_unstarted_and_drains_the_running_job(store, clock, worker):
    for i in range(6):
        add(store, id=f"j{i}")
    worker.tick()
    end_one(worker)
    worker.tick()  # j0 recorded, j1 running, the reserve holds the rest
    worker.request_stop(signal.SIGTERM)
    worker.tick()
    reserve = [f"j{i}" for i in range(2, 6)]
    assert [(store.get_job(j).state, store.get_job(j).attempts) for j in reserve] == [(JobState.PENDING, 0)] * 4
    end_one(worker)
    assert worker.tick() is None and worker.exit_code == 0
    assert state(store, "j1") == JobState.COMPLETED


def test_no_claimed_job_starts_while_the_database_fails(store, clock, worker, monkeypatch):
    for i in range(4):
        add(store, id=f"j{i}")
    worker.tick()
    end_one(worker)
    worker.tick()  # j1 running, j2 and j3 in the reserve
    def down(*a, **k):
        raise DatabaseUnavailable("the database is down")

    monkeypatch.setattr(store, "exchange", down)
    end_one(worker)  # j1 ends; its record fails
    clock.now += 1
    worker.tick()  # j2 starts (the failure is not known yet), the exchange fails
    started = set(worker.runner.running)
    end_one(worker)
    for _ in range(3):
        clock.now += worker_mod.DB_RETRY
        worker.tick()
    assert not worker.runner.running and started == {"j2"} and [j.id for j in worker.claims.reserve] == ["j3"]
    monkeypatch.undo()
    clock.now += worker_mod.DB_RETRY
    worker.tick()
    assert state(store, "j1") == state(store, "j2") == JobState.COMPLETED
    assert "j3" in worker.runner.running


def test_a_worker_held_up_past_half_stale_after_beats_before_it_starts_a_claimed_job(store, clock, worker):
    for i in range(4):
        add(store, id=f"j{i}")
    worker.tick()
    end_one(worker)
    worker.tick()  # j0 recorded, j1 running, j2 and j3 in the reserve
    end_one(worker)
    assert [j.id for j in worker.claims.reserve] == ["j2", "j3"]
    # Held up (frozen) for longer than stale-after, and found stale meanwhile: its claims went back, each
    # counting the attempt it may have started (queuectl.domain.backoff.last_attempt).
    clock.now += worker.config["stale-after"] + 1
    seen = store.worker_by_name("tick").seen
    assert dict(store.recover(worker.worker_id, seen, 1_000_000.0 + clock.now))["j2"] == JobState.FAILED
    assert worker.tick() is None and worker.exit_code == worker_mod.EXIT_LOST
    assert [j.id for j in worker.claims.reserve] == ["j2", "j3"] and not worker.runner.running  # started neither
    assert [(store.get_job(j).state, store.get_job(j).attempts) for j in ("j2", "j3")] == [(JobState.FAILED, 1)] * 2


def test_an_exchange_whose_reply_was_lost_counts_nothing_twice_and_gives_back_what_it_claimed(
        store, clock, worker, monkeypatch, worker_log):
    for i in range(20):
        add(store, id=f"j{i:02}")
    worker.tick()
    while len(worker.claims.reserve) != worker.claims.prefetch // 2 + 1:  # short jobs end and the reserve runs down
        end_one(worker)
        clock.now += 0.001
        worker.tick()
    end_one(worker)  # its end goes with the next exchange, which also tops up the reserve
    ended = worker.ledger.ended[0][0]

    real = store.exchange

    def reply_lost(*args, **kwargs):
        real(*args, **kwargs)  # committed...
        raise DatabaseUnavailable("server closed the connection unexpectedly")  # ...and no reply came

    monkeypatch.setattr(store, "exchange", reply_lost)
    clock.now += 1
    worker.tick()
    monkeypatch.undo()
    assert state(store, ended) == JobState.COMPLETED and store.get_job(ended).attempts == 1
    known = {j.id for j in worker.claims.reserve} | set(worker.runner.running)
    assert len(known) < held_by(store, worker)  # the lost reply's claims: held, never seen

    clock.now += worker_mod.DB_RETRY
    worker.tick()  # the lost claims go back; the end is found recorded
    assert {j.job_id for j in store.worker_jobs(worker.worker_id)} <= (
        {j.id for j in worker.claims.reserve} | set(worker.runner.running))
    while worker.runner.running or worker.claims.reserve:  # a lost claim never given back would stay held
        end_one(worker)
        clock.now += 0.001
        worker.tick()
    assert worker.stats.done == 20
    assert {j.attempts for j in store.list_jobs(JobState.COMPLETED, limit=50)} == {1}
    log = "\n".join(worker_log)
    assert "result is dropped" not in log and "reply was lost: giving it back" in log
    assert store.run_counts() == {"default": {"completed": 20}}


def test_a_job_whose_recorded_end_the_database_lost_ends_failed_at_the_first_exchange_after_an_error(
        store, db, clock, worker, monkeypatch, worker_log):
    # As after a failover to an asynchronous standby that had not received the end: the job is
    # running on this worker again in the database, its start recorded, and nothing runs it.
    add(store, id="lost")
    worker.tick()
    end_one(worker)
    worker.tick()
    assert state(store, "lost") == JobState.COMPLETED and not worker.runner.running
    behind_queuectls_back(db, "UPDATE jobs SET state = 'processing', worker_id = ?, finished_at = NULL,"
                          " exit_code = NULL WHERE id = 'lost'", (worker.worker_id,))

    def down(*a, **k):
        raise DatabaseUnavailable("server closed the connection unexpectedly")

    monkeypatch.setattr(store, "heartbeat", down)  # an idle worker: only its heartbeat meets the outage
    clock.now += worker.config["heartbeat-interval"] + 1
    worker.tick()
    monkeypatch.undo()
    clock.now += max(worker_mod.DB_RETRY, worker.config["poll-interval"])
    worker.tick()  # its next exchange (a claim) settles the job
    job = store.get_job("lost")
    assert (job.state, job.attempts, job.last_error, job.worker_id) == (
        JobState.FAILED, 1, worker_mod.RUN_LOST, None)  # the retry rule: a run counted, and another to come
    assert f"job lost: {worker_mod.RUN_LOST}; it ends failed" in worker_log


# -- schedules and limits ---------------------------------------------------------------------------


def test_a_due_slot_is_fired_and_its_run_claimed_at_once_and_a_draining_worker_fires_nothing(store, clock, worker):
    from queuectl.domain.recurrence import parse_rule

    wall = 1_000_000.0 + clock.now  # 1_001_000: a multiple of 10
    store.add_schedule("tick", parse_rule(None, "10s", "UTC"), {"command": "true"}, "skip", wall)
    wait = worker.tick()
    assert store.list_jobs() == [] and wait <= 1.0  # it looks again within a second
    clock.now += 10
    worker.tick()  # fires the slot of wall + 10 ...
    (job,) = store.list_jobs()
    assert job.id == "tick@1970-01-12T14:03:30Z"
    worker.tick()  # ... and claims it at the next turn, not at the next poll (poll-interval is 5 s)
    assert state(store, job.id) == JobState.PROCESSING
    end_one(worker)
    worker.tick()
    worker.request_stop(signal.SIGTERM)
    clock.now += 10
    worker.tick()
    assert [j.id for j in store.list_jobs()] == [job.id]  # stopping: the next slot is left to other workers


def test_a_job_of_a_limited_queue_that_ends_is_followed_by_a_claim_at_once(store, clock):
    w = make_worker(store, clock, slots=2)
    try:
        store.set_limit("build", 1_000_000.0 + clock.now, concurrency=1)
        for i in range(3):
            add(store, id=f"b{i}", queue="build", command="sleep 0.05")
        w.tick()
        assert held_by(store, w) == 1  # one place, though two slots are free
        w.tick()  # the queue had nothing more for it: no claim before the poll (5 s) ...
        end_one(w)
        w.tick()  # ... but the job that ended freed the place: the end's exchange claims again
        assert [j.id for j in store.list_jobs(state=JobState.PROCESSING)] == ["b1"]
    finally:
        w.runner.stop_all(signal.SIGKILL)
        while w.runner.running:
            w.runner.wait(None)
        w.runner.close()


def test_a_claim_held_back_by_a_rate_limit_is_tried_again_when_the_window_frees_not_at_the_poll(store, clock):
    """poll-interval is 5 s; with --rate 2/2s the third job is claimed once the first claims leave the window
    (2 s + RATE_SLACK after them), not at the poll."""
    from queuectl.store.limits import RATE_SLACK

    w = make_worker(store, clock, slots=2)
    try:
        store.set_limit("mail", 1_000_000.0 + clock.now, rate=(2, 2.0))
        for i in range(3):
            add(store, id=f"m{i}", queue="mail")
        claimed_at = clock.now
        w.tick()
        assert held_by(store, w) == 2  # the window holds two claims
        while w.stats.done < 2:
            end_one(w)
            w.tick()  # records the ends; its claim comes back empty
        while state(store, "m2") == JobState.PENDING and clock.now - claimed_at < 6:
            clock.now += 0.125
            w.tick()
        assert state(store, "m2") == JobState.PROCESSING
        assert 2.0 + RATE_SLACK <= clock.now - claimed_at < 2.0 + RATE_SLACK + 0.25
    finally:
        w.runner.stop_all(signal.SIGKILL)
        while w.runner.running:
            w.runner.wait(None)
        w.runner.close()


def test_a_last_attempt_has_its_start_recorded_before_it_runs_and_others_lazily(store, clock, worker, tmp_path):
    # queuectl.domain.backoff.last_attempt: a recovery that finds a last attempt unrecorded knows it never ran.
    marker = tmp_path / "ran"
    add(store, id="last", command=f"touch {marker}; sleep 30", max_retries=0)
    add(store, id="lazy", command="sleep 30", max_retries=1)
    worker.tick()  # claims "last" (the only slot) and starts it
    assert "last" in worker.runner.running
    job = store.get_job("last")
    assert (job.attempts, job.started_at) == (1, 1_000_000.0 + clock.now)  # recorded before any exchange
    worker.runner.stop_all(signal.SIGKILL)
    while worker.runner.running:
        end_one(worker)
    clock.now += 1
    worker.tick()  # records the end of "last" (dead: its only attempt) and starts "lazy"
    assert "lazy" in worker.runner.running
    assert (store.get_job("lazy").attempts, store.get_job("lazy").started_at) == (0, None)  # not yet recorded
    clock.now += worker_mod.RECORD_AFTER
    worker.tick()
    assert store.get_job("lazy").attempts == 1


def test_a_last_attempt_whose_start_cannot_be_recorded_does_not_start(store, clock, worker, monkeypatch):
    add(store, id="last", command="true", max_retries=0)
    real = store.exchange
    calls = []

    def exchange(worker_id, ex, *args):  # the claim goes through; the start record before the run fails
        calls.append(ex)
        if ex.running and not ex.claim:
            raise DatabaseUnavailable("database unavailable: test")
        return real(worker_id, ex, *args)

    monkeypatch.setattr(store, "exchange", exchange)
    worker.tick()
    assert not worker.runner.running and [j.id for j in worker.claims.reserve] == ["last"]
    assert (store.get_job("last").attempts, store.get_job("last").started_at) == (0, None)
    monkeypatch.setattr(store, "exchange", real)
    clock.now += worker_mod.DB_RETRY
    worker.tick()
    assert "last" in worker.runner.running and store.get_job("last").attempts == 1


def test_the_log_says_a_failed_attempts_outcome_once_a_retry_after_its_backoff_or_dead(store, clock, worker,
                                                                                          worker_log):
    store.set_setting("backoff-base", "3")
    add(store, id="flaky", command="exit 3", max_retries=1)
    for expected in ("job flaky: retry 1/1 in 3 s (exit code 3)", "job flaky: dead: exit code 3 (attempt 2 of 2)"):
        worker.tick()  # claims the job and starts it
        assert "flaky" in worker.runner.running
        end_one(worker)
        worker.tick()  # records the end
        assert [line for line in worker_log if line.startswith("job flaky:")][-1] == expected
        clock.now += 10  # past its backoff
    assert store.get_job("flaky").state == JobState.DEAD
    assert not worker.exchange.attempts  # what the lines need is dropped with the line
    assert not any("now" in line or "failed (" in line for line in worker_log), worker_log


def test_a_failure_line_escapes_what_it_shows(store, clock, worker, worker_log):
    add(store, id="nowhere", command="true", cwd="/no/such/\x1b[2Jdir", max_retries=0)
    worker.tick()
    end_one(worker)
    worker.tick()
    line = next(line for line in worker_log if line.startswith("job nowhere:"))
    assert "\x1b" not in line and "\\x1b[2Jdir" in line and line.startswith("job nowhere: dead: cannot start"), line


@pytest.fixture
def two_slots(store, clock):
    w = make_worker(store, clock, slots=2)
    yield w
    w.runner.stop_all(signal.SIGKILL)
    while w.runner.running:
        w.runner.wait(None)
    w.runner.close()


def test_a_draining_worker_logs_which_running_jobs_it_waits_for_at_once_then_every_few_seconds(
        store, clock, two_slots, worker_log):
    worker = two_slots
    for job_id in ("j-41", "j-44"):
        add(store, id=job_id, command="sleep 30")
    worker.tick()
    assert sorted(worker.runner.running) == ["j-41", "j-44"]
    clock.now += 12
    worker.stop_requests = 1
    said = lambda: [line for line in worker_log if line.startswith("waiting for")]  # noqa: E731
    worker.tick()  # the signal came during a turn: the turn says it, then the loop announces the stop
    assert said() == ["waiting for 2 running jobs: j-41 (12 s), j-44 (12 s)"]
    worker.drain.announce(worker.stop_requests, 0)
    worker.tick()
    assert len(said()) == 1  # said once, not again for the announcement
    clock.now += DRAIN_SAY_EVERY - 0.5
    worker.tick()
    assert len(said()) == 1  # not before DRAIN_SAY_EVERY
    clock.now += 0.5
    worker.tick()
    assert said()[1:] == ["waiting for 2 running jobs: j-41 (17 s), j-44 (17 s)"]


def test_the_waiting_line_names_the_longest_running_jobs_first_escaped_and_counts_the_rest():
    assert waiting_line([("j-44", 3.4), ("j-41", 12.2)]) == "waiting for 2 running jobs: j-41 (12 s), j-44 (3 s)"
    assert waiting_line([("only", 0.2)]) == "waiting for 1 running job: only (0 s)"
    many = [(f"j{i}", float(i)) for i in range(MOST_NAMED + 3)]
    line = waiting_line(many)
    assert line.startswith(f"waiting for {MOST_NAMED + 3} running jobs: j12 (12 s), j11 (11 s)")
    assert line.endswith("j3 (3 s), and 3 more") and "j2 " not in line
    assert waiting_line([("odd\x1b[2J", 1.0)]) == "waiting for 1 running job: odd\\x1b[2J (1 s)"
