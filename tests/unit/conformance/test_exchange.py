"""The exchange, on both engines through the interface: claims (order, limits, queues, never the same job
twice), what an exchange records (starts, ends, output, jobs given back), retries and their backoff, the dead
letter queue, outcome codes, and when a job is due across wall-clock steps."""

import threading
import time

import pytest

from queuectl.domain.backoff import last_attempt
from queuectl.domain.clock import Instant
from queuectl.domain.jobspec import parse_job
from queuectl.domain.models import JobState
from queuectl.store import WorkerGone, open_store
from queuectl.store.request import Exchange, Outcome, Running
from support.worker_steps import NOW, A, add, bad, claim, failed_once, finish, is_ready, ok, register, requeue
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_claim_order_priority_then_run_at_then_enqueue_order(store):
    add(store, id="low", priority=-1)
    add(store, id="first")
    add(store, id="second")
    add(store, id="high", priority=10)
    add(store, id="earlier", run_at="1970-01-12T13:45:00Z")  # 999900 s: before NOW
    add(store, id="future", delay=60)
    w = register(store)
    claimed = claim(store, w, [], 10, NOW)
    assert [j.id for j in claimed] == ["high", "earlier", "first", "second", "low"]
    assert all(j.state == JobState.PROCESSING and j.attempts == 1 and j.worker_id == w for j in claimed)
    assert claim(store, w, [], 10, NOW + 61)[0].id == "future"


def test_claim_respects_limit_and_queues(store):
    for i in range(3):
        add(store, id=f"a{i}", queue="a")
    add(store, id="b0", queue="b")
    w = register(store)
    assert [j.id for j in claim(store, w, ["b"], 5, NOW)] == ["b0"]
    assert [j.id for j in claim(store, w, ["a", "c"], 2, NOW)] == ["a0", "a1"]
    assert claim(store, w, [], 0, NOW) == []


def test_two_connections_never_claim_the_same_job(db):
    s = open_store(db)
    s.enqueue([parse_job(f'{{"id":"j{i}","command":"x"}}', NOW) for i in range(400)], NOW)
    results: dict[int, list[str]] = {}
    together = threading.Barrier(2)

    def drain(n):
        store = open_store(db)
        wid = register(store, name=f"w{n}")
        got = results.setdefault(n, [])
        together.wait()  # both connections claim at the same time
        while batch := claim(store, wid, [], 1, NOW):
            got += [j.id for j in batch]
            time.sleep(0.0005)  # as a worker runs its job between claims: lets the other connection in

    threads = [threading.Thread(target=drain, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = results[0] + results[1]
    assert sorted(everything) == sorted(f"j{i}" for i in range(400))
    assert len(set(everything)) == 400
    assert results[0] and results[1]


def test_success_completes_and_stores_output(store):
    add(store, id="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    assert finish(store, w, [ok("a")], NOW + 1) == [JobState.COMPLETED]
    job = store.get_job("a", output=True)
    assert (job.state, job.exit_code, job.stdout, job.stderr, job.finished_at) == (
        JobState.COMPLETED, 0, b"out", b"err", NOW + 1)
    assert job.worker_id is None


def test_failure_retries_with_backoff_then_dies(store):
    add(store, id="a", max_retries=2)
    w = register(store)
    now = NOW
    for attempt, state, delay in [(1, JobState.FAILED, 2), (2, JobState.FAILED, 4), (3, JobState.DEAD, None)]:
        [job] = claim(store, w, [], 1, now)
        assert job.attempts == attempt
        assert finish(store, w, [bad("a", 7)], now) == [state]
        job = store.get_job("a")
        assert job.last_error == "exit code 7" and job.exit_code == 7
        if delay:
            assert job.run_at == now + delay
            assert claim(store, w, [], 1, now + delay - 0.01) == []  # not before its backoff
            now += delay
    assert claim(store, w, [], 1, now + 10_000) == []


def test_max_retries_unset_follows_the_setting_at_failure_time(store):
    add(store, id="a")
    store.set_setting("max-retries", "0")
    w = register(store)
    claim(store, w, [], 1, NOW)
    assert finish(store, w, [bad("a")], NOW) == [JobState.DEAD]


def test_backoff_settings_apply(store):
    store.set_setting("backoff_base", "3")
    store.set_setting("backoff-max", "5")
    add(store, id="a", max_retries=5)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("a")], NOW)
    assert store.get_job("a").run_at == NOW + 3
    claim(store, w, [], 1, NOW + 3)
    finish(store, w, [bad("a")], NOW + 3)
    assert store.get_job("a").run_at == NOW + 3 + 5  # 9 capped at 5


def test_the_exchange_returns_the_backoff_it_chose_for_each_job_it_recorded_failed(store):
    store.set_setting("backoff-base", "3")
    add(store, id="retry", max_retries=2)
    add(store, id="dead", max_retries=0)
    add(store, id="ok")
    add(store, id="cancelled")
    w = register(store)
    claim(store, w, [], 4, NOW)
    store.cancel(["cancelled"], NOW)  # requested: its failure ends it cancelled, with no retry
    done = store.exchange(w, Exchange(ended=[bad("retry"), bad("dead"), ok("ok"), bad("cancelled")]), (), NOW + 1)
    assert done.states == [JobState.FAILED, JobState.DEAD, JobState.COMPLETED, JobState.CANCELLED]
    assert done.retry_in == {"retry": 3.0} and store.get_job("retry").run_at == NOW + 1 + 3
    assert store.exchange(w, Exchange(ended=[ok("ok")]), (), NOW + 2).retry_in is None  # none failed


def test_finish_by_a_worker_that_lost_the_job_changes_nothing(store):
    add(store, id="a")
    w1 = register(store, "w1")
    w2 = register(store, "w2")
    claim(store, w1, [], 1, NOW)
    assert finish(store, w2, [ok("a")], NOW) == [None]
    assert store.get_job("a").state == JobState.PROCESSING
    assert requeue(store, w2, ["a"], NOW) == 0


def test_requeue_gives_the_attempt_back(store):
    add(store, id="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    assert requeue(store, w, ["a"], NOW) == 1
    job = store.get_job("a")
    assert (job.state, job.attempts, job.worker_id) == (JobState.PENDING, 0, None)


def test_a_silent_retry_does_not_keep_the_previous_attempts_output(store):
    add(store, id="a", max_retries=1)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [Outcome("a", False, 1, "exit code 1", b"first out", b"first err")], NOW)
    assert store.get_job("a", output=True).stdout == b"first out"
    claim(store, w, [], 1, NOW + 100)
    finish(store, w, [Outcome("a", True, 0, None, b"", b"")], NOW + 100)
    job = store.get_job("a", output=True)
    assert (job.state, job.stdout or b"", job.stderr or b"") == (JobState.COMPLETED, b"", b"")


def test_has_work_counts_ready_jobs_and_retries_not_future_jobs(store):
    w = register(store)
    add(store, id="later", delay=3600)
    assert not store.has_work([], NOW)
    add(store, id="a", max_retries=1)
    assert store.has_work([], NOW) and not store.has_work(["other"], NOW)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("a")], NOW)
    assert store.has_work([], NOW)  # waiting for its retry


def runs(store) -> dict:
    return store.run_counts().get("default", {})


def test_a_claim_counts_no_attempt_until_the_start_is_recorded(store):
    add(store, id="a")
    w = register(store)
    [job] = store.exchange(w, Exchange(claim=5), [], NOW).jobs
    got = store.get_job("a")
    assert (job.attempts, got.state, got.attempts, got.started_at, got.worker_id) == (
        0, JobState.PROCESSING, 0, None, w)
    store.exchange(w, Exchange(running=[Running("a", NOW + 1)]), [], NOW + 1)
    got = store.get_job("a")
    assert (got.attempts, got.started_at) == (1, NOW + 1)
    store.exchange(w, Exchange(running=[Running("a", None, 4242, 99)]), [], NOW + 2)  # its group, later
    assert (store.get_job("a").attempts, store.worker_jobs(w)[0].pgid) == (1, 4242)


def test_a_start_recorded_with_its_end_counts_the_attempt_once(store):
    add(store, id="ok")
    add(store, id="retry", max_retries=1)
    add(store, id="dead", max_retries=0)
    add(store, id="ok2")
    add(store, id="theirs")
    w = register(store)
    store.exchange(w, Exchange(claim=4), [], NOW)
    store.exchange(register(store, "w2"), Exchange(claim=1), [], NOW)
    states = store.exchange(w, Exchange(ended=[
        Outcome("ok", True, 0, None, b"out", started_at=NOW + 1, ended_at=NOW + 2),
        Outcome("theirs", True, 0, None, started_at=NOW + 1),  # not this worker's: left alone
        Outcome("retry", False, 1, "exit code 1", started_at=NOW + 1),
        Outcome("ok2", True, 0, None, started_at=NOW + 1),
        Outcome("dead", False, 1, "exit code 1", started_at=NOW + 1)]), [], NOW + 3).states
    assert states == [JobState.COMPLETED, None, JobState.FAILED, JobState.COMPLETED, JobState.DEAD]
    assert [(j.attempts, j.started_at) for j in map(store.get_job, ("ok", "retry", "dead", "ok2"))] == [
        (1, NOW + 1)] * 4
    assert (store.get_job("theirs").state, store.get_job("ok", output=True).stdout) == (JobState.PROCESSING, b"out")
    assert runs(store) == {"completed": 2, "failed": 1, "dead": 1}


def test_a_job_given_back_unstarted_is_ready_again_with_no_attempt_and_no_run(store):
    add(store, id="a")
    add(store, id="b")
    w = register(store)
    store.exchange(w, Exchange(claim=2), [], NOW)
    store.cancel(["b"], NOW)  # a cancel of a claimed job is a request: its worker gives it back cancelled
    store.exchange(w, Exchange(release=["a", "b"]), [], NOW + 1)
    a, b = store.get_job("a"), store.get_job("b")
    assert (a.state, a.attempts, a.worker_id) == (JobState.PENDING, 0, None)
    assert (b.state, b.attempts, b.last_error) == (JobState.CANCELLED, 0, "cancelled")
    assert runs(store) == {}
    w2 = register(store, "w2")
    assert [j.id for j in store.exchange(w2, Exchange(claim=5), [], NOW + 1)[1]] == ["a"]


def test_a_started_job_is_not_given_back_as_unstarted(store):
    add(store, id="a")
    w = register(store)
    store.exchange(w, Exchange(claim=1), [], NOW)
    store.exchange(w, Exchange(running=[Running("a", NOW)], release=["a"]), [], NOW)
    got = store.get_job("a")
    assert (got.state, got.attempts, got.worker_id) == (JobState.PROCESSING, 1, w)


def test_recovery_counts_jobs_that_may_have_run_and_gives_back_those_that_cannot_have(store):
    # A start not recorded may have happened (lazy records): it counts, unless the job was to run its
    # last attempt (recorded before it runs) or a cancel was asked (it is cancelled).
    add(store, id="started")
    add(store, id="unstarted")
    add(store, id="unstarted-cancelled")
    add(store, id="unstarted-last", max_retries=0)
    dead = register(store)
    store.exchange(dead, Exchange(claim=4), [], NOW)
    store.exchange(dead, Exchange(running=[Running("started", NOW)]), [], NOW)
    store.cancel(["unstarted-cancelled"], NOW)
    assert {j.job_id: (j.started, j.attempts) for j in store.worker_jobs(dead)} == {
        "started": (True, 1), "unstarted": (False, 0), "unstarted-cancelled": (False, 0),
        "unstarted-last": (False, 0)}
    seen = store.worker_by_name("w1").seen
    assert dict(store.recover(dead, seen, NOW + 100)) == {
        "started": JobState.FAILED, "unstarted": JobState.FAILED, "unstarted-cancelled": JobState.CANCELLED,
        "unstarted-last": JobState.PENDING}
    assert [(j.attempts, j.last_error) for j in map(store.get_job, ("started", "unstarted", "unstarted-last"))] == [
        (1, "worker lost"), (1, "worker lost"), (0, None)]
    assert runs(store) == {"recovered": 2}


@pytest.mark.parametrize("max_retries", [0, 2])
def test_a_job_whose_worker_is_lost_at_each_start_runs_at_most_max_retries_plus_one_times(store, max_retries):
    """Each attempt but the last is lost before its start is recorded, the last one after its start was
    recorded first, as a worker does (queuectl.domain.backoff.last_attempt): the job is dead after exactly
    max_retries + 1 runs, and never given back uncounted after a run."""
    add(store, id="poison", max_retries=max_retries)
    config = store.settings()
    for n in range(max_retries + 1):
        w = register(store, f"w{n}")
        now = NOW + 100 * n
        [job] = store.exchange(w, Exchange(claim=1), [], now)[1]
        assert (job.id, job.attempts) == ("poison", n)
        if last_attempt(job.attempts, job.max_retries, config):
            store.exchange(w, Exchange(running=[Running("poison", now)]), [], now)
        state = JobState.DEAD if n == max_retries else JobState.FAILED
        assert dict(store.recover(w, store.worker_by_name(f"w{n}").seen, now + 50)) == {"poison": state}
        assert store.get_job("poison").attempts == n + 1
    assert store.get_job("poison").last_error == "worker lost" and runs(store) == {"recovered": max_retries + 1}
    assert store.exchange(register(store, "late"), Exchange(claim=1), [], NOW + 10_000)[1] == []


def test_one_exchange_is_one_transaction_and_a_worker_gone_changes_nothing(store):
    add(store, id="a")
    add(store, id="b")
    w = register(store)
    store.exchange(w, Exchange(claim=1), [], NOW)
    store.deregister(w)  # as a recovery by another worker does first
    with pytest.raises(WorkerGone):
        store.exchange(w, Exchange(ended=[Outcome("a", True, 0, None, started_at=NOW)], claim=1), [], NOW)
    assert [store.get_job(j).state for j in ("a", "b")] == [JobState.PROCESSING, JobState.PENDING]
    assert runs(store) == {}


def test_a_claim_takes_no_more_than_asked_and_none_from_a_paused_queue(store):
    for i in range(5):
        add(store, id=f"j{i}")
    w = register(store)
    assert [j.id for j in store.exchange(w, Exchange(claim=3), [], NOW)[1]] == ["j0", "j1", "j2"]
    assert store.exchange(w, Exchange(claim=0), [], NOW) == ([], [], None, None)
    store.set_paused(["default"], True, NOW)
    assert store.exchange(w, Exchange(claim=5), [], NOW) == ([], [], None, None)
    assert store.counts() == {"default": {"pending": 2, "processing": 3}}


def test_an_exchange_sent_again_counts_no_start_twice(store):
    # A worker sends an exchange again when it cannot tell whether the first one committed (the
    # connection was lost before the reply): starts and ends recorded twice count one attempt each.
    for job_id in ("a", "b", "c"):
        add(store, id=job_id)
    w = register(store)
    store.exchange(w, Exchange(claim=3), [], NOW)
    again = Exchange(running=[Running(j, NOW) for j in ("a", "b", "c")])
    store.exchange(w, again, [], NOW)
    store.exchange(w, again, [], NOW)
    assert [store.get_job(j).attempts for j in ("a", "b", "c")] == [1, 1, 1]
    ended = Exchange(ended=[Outcome("a", True, 0, None, b"", b"", NOW + 1, NOW),  # the hot path on PostgreSQL
                            Outcome("b", True, 0, None, b"", b"", NOW + 1, NOW)])
    assert store.exchange(w, ended, [], NOW + 1)[0] == [JobState.COMPLETED] * 2
    failed = Exchange(ended=[Outcome("c", False, 1, "exit code 1", b"", b"", NOW + 1, NOW)])
    assert store.exchange(w, failed, [], NOW + 1)[0] == [JobState.FAILED]
    assert [store.get_job(j).attempts for j in ("a", "b", "c")] == [1, 1, 1]


# -- outcome codes: a run that recovery ended counts as recovered by its code (jobs.end_code), not its error text


def test_a_recovered_job_that_runs_again_counts_that_run_by_how_it_ended(store):
    add(store, id="a", max_retries=3)
    lost = register(store, "lost")
    claim(store, lost, [], 1, NOW)
    store.recover(lost, store.worker_by_name("lost").seen, NOW)
    assert store.get_job("a").last_error == "worker lost"
    w = register(store, "w2")
    assert [j.id for j in claim(store, w, [], 1, NOW + 10_000)] == ["a"]  # due again after its backoff
    finish(store, w, [ok("a")], NOW + 10_000)
    assert store.run_counts() == {"default": {"recovered": 1, "completed": 1}}


def test_a_failure_whose_error_reads_worker_lost_is_no_recovery(store):
    add(store, id="a", max_retries=0)
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [Outcome("a", False, None, "worker lost", b"", b"")], NOW)
    assert store.run_counts() == {"default": {"dead": 1}}


# -- due times across clock steps ---------------------------------------------------------------------


def test_a_retry_is_due_on_the_monotonic_clock_of_its_boot_whatever_the_wall_clock_does(store):
    failed_once(store, Instant(NOW, 100.0, A))
    assert store.get_job("r").run_at == NOW + 2  # the wall-clock estimate, for people
    for wall_step in (0, -3600, +3600):
        assert not is_ready(store, Instant(NOW + wall_step, 101.9, A)), wall_step  # a forward step runs nothing early
        assert is_ready(store, Instant(NOW + wall_step, 102.0, A)), wall_step  # a backward step stalls nothing


def test_a_reader_of_another_boot_uses_the_wall_clock_and_a_step_back_makes_a_retry_due(store):
    failed_once(store, Instant(NOW, 100.0, A))
    assert not is_ready(store, Instant(NOW + 1, 5.0, "boot-b"))
    assert is_ready(store, Instant(NOW + 2, 5.0, "boot-b"))
    # Its wall clock reads earlier than the failure: stepped back (or behind): due at once, never
    # later than the backoff after the failure.
    assert is_ready(store, Instant(NOW - 3600, 5.0, "boot-b"))
    assert is_ready(store, NOW - 3600)  # a bare wall-clock reading is such a reader too
    assert not is_ready(store, NOW - 0.5)  # within STEP_TOLERANCE: the backoff holds


def test_a_job_enqueued_before_a_backward_step_is_not_held_back_by_it(store):
    add(store, id="now", now=Instant(NOW, 10.0, A))
    add(store, id="later", delay=30, now=Instant(NOW, 10.0, A))
    assert [j.id for j in claim(store, register(store), [], 5, Instant(NOW - 3600, 10.5, A))] == ["now"]
    assert not is_ready(store, Instant(NOW - 3600, 39.0, A))
    assert is_ready(store, Instant(NOW - 3600, 40.0, A))


def test_a_long_delay_is_not_cut_short_by_a_reader_whose_clock_is_behind(store):
    add(store, id="tomorrow", delay=86400, now=Instant(NOW, 10.0, A))
    assert not is_ready(store, Instant(NOW - 1.5, 5.0, "boot-b"))  # another host, a little behind
    assert not is_ready(store, Instant(NOW + 86399, 5.0, "boot-b"))
    assert is_ready(store, Instant(NOW + 86400, 5.0, "boot-b"))


def test_an_absolute_run_at_stays_absolute(store):
    add(store, id="at", run_at="1970-01-12T13:56:40Z", now=Instant(NOW, 10.0, A))  # NOW + 600
    assert store.get_job("at").run_at == NOW + 600
    assert not is_ready(store, Instant(NOW + 599, 5000.0, A))  # however long the monotonic clock ran
    assert not is_ready(store, Instant(NOW - 3600, 5000.0, A))
    assert is_ready(store, Instant(NOW + 600, 11.0, A))


def test_a_dlq_retry_and_a_requeue_are_due_at_once_after_a_backward_step(store):
    add(store, id="d", max_retries=0, now=Instant(NOW, 10.0, A))
    add(store, id="q", now=Instant(NOW, 10.0, A))
    w = register(store, slots=2)
    claim(store, w, [], 2, Instant(NOW, 10.0, A))
    finish(store, w, [bad("d")], Instant(NOW, 10.0, A))
    store.dlq_retry(["d"], Instant(NOW, 11.0, A))
    requeue(store, w, ["q"], Instant(NOW, 11.0, A))
    claimed = claim(store, w, [], 5, Instant(NOW - 3600, 11.5, A))
    assert sorted(j.id for j in claimed) == ["d", "q"]
