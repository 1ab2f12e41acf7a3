"""The store on both engines (a real SQLite file, a real PostgreSQL server): states, claiming,
ownership, recovery, settings. What only one engine has is tested in test_store_sqlite.py and
test_postgres.py."""

import json
import threading
import time

import pytest

from queuectl.clock import Instant, instant
from queuectl.errors import Conflict, InvalidConfig, InvalidInput, NotFound
from queuectl.jobspec import parse_job
from queuectl.models import JobState
from queuectl.store import DuplicateJob, Enqueued, Outcome, WorkerGone, open_store
from support.storeops import claim, finish, requeue

NOW = 1_000_000.0


@pytest.fixture
def db(backend_db):
    """Each test runs on SQLite and on PostgreSQL."""
    return backend_db


def add(store, now=NOW, **fields):
    fields.setdefault("command", "true")
    import json
    job = parse_job(json.dumps(fields), instant(now).wall)
    store.enqueue([job], now)
    return job.id


def register(store, name="w1", now=NOW, **kw):
    info = {"name": name, "host": "testhost", "boot_id": "b", "pid": 1, "pid_start": 1, "slots": 1,
            "queues": [], "unit": None, **kw}
    return store.register_worker(info, now)[0]


def ok(job_id):
    return Outcome(job_id, True, 0, None, b"out", b"err")


def bad(job_id, code=1):
    return Outcome(job_id, False, code, f"exit code {code}", b"", b"boom")


def test_enqueued_job_is_visible_from_a_new_connection(store, db):
    add(store, id="a", command="echo 1", queue="q", priority=5, max_retries=2, timeout=3, cwd="/")
    job = open_store(db).get_job("a")
    assert (job.state, job.queue, job.priority, job.max_retries, job.timeout, job.cwd, job.attempts) == (
        JobState.PENDING, "q", 5, 2, 3.0, "/", 0)


def test_duplicate_in_a_batch_inserts_nothing(store):
    add(store, id="old")
    jobs = [parse_job('{"id":"n1","command":"x"}', NOW), parse_job('{"id":"old","command":"x"}', NOW)]
    with pytest.raises(DuplicateJob) as e:
        store.enqueue(jobs, NOW)
    assert e.value.job_id == "old"
    with pytest.raises(NotFound):
        store.get_job("n1")
    twice = [parse_job('{"id":"t","command":"x"}', NOW), parse_job('{"id":"t","command":"y"}', NOW)]
    with pytest.raises(DuplicateJob, match="'t'"):
        store.enqueue(twice, NOW)
    assert store.counts() == {"default": {"pending": 1}}


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
        store = open_store(db, durable=False)
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


def test_a_worker_that_beat_since_it_was_judged_keeps_its_jobs(store):
    add(store, id="a")
    w = register(store, now=NOW)
    claim(store, w, [], 1, NOW)
    [judged] = store.workers()
    store.heartbeat(w, NOW + 100)  # it beats between the judgement and the recovery
    assert store.recover(w, judged.seen, NOW + 101) == []  # re-checked inside the transaction
    assert store.get_job("a").state == JobState.PROCESSING
    assert store.worker_by_name("w1").seen == (judged.beats + 1, NOW + 100)
    # A worker of version 2 beats without counting: its heartbeat time still tells.
    store.c.execute("UPDATE workers SET heartbeat_at = ?", (NOW + 105,))
    assert store.recover(w, (judged.beats + 1, NOW + 100), NOW + 106) == []
    assert store.recover(w, (judged.beats + 1, NOW + 105), NOW + 106) == [("a", JobState.FAILED)]


def test_jobs_whose_worker_row_is_gone_are_recovered_as_orphans(store):
    add(store, id="a")
    w = register(store)
    claim(store, w, [], 1, NOW)
    store.c.execute("DELETE FROM workers")  # as a crash between two statements of an old version might
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


# -- due times across clock steps ---------------------------------------------------------------------

A = "boot-a"  # the clock domain of the worker that failed the job


def _failed_once(store, now):
    """A job that failed its first attempt at `now` (backoff-base 2: its retry is due 2 s later)."""
    add(store, id="r", max_retries=5, now=now)
    w = register(store, now=now)
    claim(store, w, [], 1, now)
    assert finish(store, w, [bad("r")], now) == [JobState.FAILED]
    return w


def _ready(store, now) -> bool:
    return store._any_ready([], instant(now))


def test_a_retry_is_due_on_the_monotonic_clock_of_its_boot_whatever_the_wall_clock_does(store):
    _failed_once(store, Instant(NOW, 100.0, A))
    assert store.get_job("r").run_at == NOW + 2  # the wall-clock estimate, for people
    for wall_step in (0, -3600, +3600):
        assert not _ready(store, Instant(NOW + wall_step, 101.9, A)), wall_step  # a forward step runs nothing early
        assert _ready(store, Instant(NOW + wall_step, 102.0, A)), wall_step  # a backward step stalls nothing


def test_a_reader_of_another_boot_uses_the_wall_clock_and_a_step_back_makes_a_retry_due(store):
    _failed_once(store, Instant(NOW, 100.0, A))
    assert not _ready(store, Instant(NOW + 1, 5.0, "boot-b"))
    assert _ready(store, Instant(NOW + 2, 5.0, "boot-b"))
    # Its wall clock reads earlier than the failure: stepped back (or behind): due at once, never
    # later than the backoff after the failure.
    assert _ready(store, Instant(NOW - 3600, 5.0, "boot-b"))
    assert _ready(store, NOW - 3600)  # a bare wall-clock reading is such a reader too
    assert not _ready(store, NOW - 0.5)  # within STEP_TOLERANCE: the backoff holds


def test_a_job_enqueued_before_a_backward_step_is_not_held_back_by_it(store):
    add(store, id="now", now=Instant(NOW, 10.0, A))
    add(store, id="later", delay=30, now=Instant(NOW, 10.0, A))
    assert [j.id for j in claim(store, register(store), [], 5, Instant(NOW - 3600, 10.5, A))] == ["now"]
    assert not _ready(store, Instant(NOW - 3600, 39.0, A))
    assert _ready(store, Instant(NOW - 3600, 40.0, A))


def test_a_long_delay_is_not_cut_short_by_a_reader_whose_clock_is_behind(store):
    add(store, id="tomorrow", delay=86400, now=Instant(NOW, 10.0, A))
    assert not _ready(store, Instant(NOW - 1.5, 5.0, "boot-b"))  # another host, a little behind
    assert not _ready(store, Instant(NOW + 86399, 5.0, "boot-b"))
    assert _ready(store, Instant(NOW + 86400, 5.0, "boot-b"))


def test_an_absolute_run_at_stays_absolute(store):
    add(store, id="at", run_at="1970-01-12T13:56:40Z", now=Instant(NOW, 10.0, A))  # NOW + 600
    assert store.get_job("at").run_at == NOW + 600
    assert not _ready(store, Instant(NOW + 599, 5000.0, A))  # however long the monotonic clock ran
    assert not _ready(store, Instant(NOW - 3600, 5000.0, A))
    assert _ready(store, Instant(NOW + 600, 11.0, A))


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


def test_has_work_counts_ready_jobs_and_retries_not_future_jobs(store):
    w = register(store)
    add(store, id="later", delay=3600)
    assert not store.has_work([], NOW)
    add(store, id="a", max_retries=1)
    assert store.has_work([], NOW) and not store.has_work(["other"], NOW)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("a")], NOW)
    assert store.has_work([], NOW)  # waiting for its retry


def test_dlq_retry_is_all_or_nothing(store):
    add(store, id="d", max_retries=0)
    add(store, id="p")
    w = register(store)
    claim(store, w, [], 1, NOW)
    finish(store, w, [bad("d")], NOW)
    with pytest.raises(Conflict, match="pending, not dead"):
        store.dlq_retry(["d", "p"], NOW)
    with pytest.raises(NotFound):
        store.dlq_retry(["d", "nope"], NOW)
    assert store.get_job("d").state == JobState.DEAD
    store.dlq_retry(["d"], NOW + 5)
    job = store.get_job("d")
    assert (job.state, job.attempts, job.run_at) == (JobState.PENDING, 0, NOW + 5)


def test_counts_kept_by_triggers_match_the_rows(store):
    for i in range(20):
        add(store, id=f"j{i}", queue="q" if i % 2 else "r", max_retries=i % 3)
    w = register(store, slots=20)
    jobs = claim(store, w, [], 20, NOW)
    finish(store, w, [ok(j.id) if i % 3 else bad(j.id) for i, j in enumerate(jobs[:15])], NOW)
    requeue(store, w, [jobs[15].id], NOW)
    actual: dict = {}
    for queue, state, n in store.c.execute("SELECT queue, state, count(*) FROM jobs GROUP BY 1, 2"):
        actual.setdefault(queue, {})[state] = n
    assert store.counts() == actual


def test_list_jobs_filters_newest_first(store):
    for i in range(5):
        add(store, id=f"j{i}", queue="a" if i < 3 else "b")
    assert [j.id for j in store.list_jobs(limit=2)] == ["j4", "j3"]
    assert [j.id for j in store.list_jobs(queue="a")] == ["j2", "j1", "j0"]
    assert store.list_jobs(state=JobState.DEAD) == []


def test_settings_defaults_set_and_consistency(store):
    s = store.settings()
    assert (s["max-retries"], s["backoff-base"], s["backoff-max"], s["job-timeout"]) == (3, 2.0, 3600.0, None)
    assert store.set_setting("job_timeout", "2.5") == 2.5
    assert store.set_setting("job-timeout", "none") is None
    with pytest.raises(InvalidInput, match="must exceed 2 x heartbeat-interval"):
        store.set_setting("heartbeat-interval", "20")
    with pytest.raises(InvalidInput, match="unknown config key"):
        store.set_setting("colour", "1")
    with pytest.raises(InvalidInput, match="whole number"):
        store.set_setting("max-retries", "1.5")
    assert store.settings()["heartbeat-interval"] == 5.0


def test_a_stored_setting_broken_by_hand_is_invalid_config(store):
    store.c.execute("INSERT INTO config VALUES ('max-retries', '\"lots\"')")
    with pytest.raises(InvalidConfig, match="max-retries"):
        store.settings()


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


# -- cancel, retry, pause, run counters -----------------------------------------------------------------


def test_cancel_each_state(store):
    for job_id in ("p", "f", "r", "c", "d"):
        add(store, id=job_id, max_retries=0 if job_id == "d" else 3)
    w = register(store, slots=5)
    claim(store, w, [], 5, NOW)
    finish(store, w, [bad("f"), ok("c"), bad("d")], NOW)
    requeue(store, w, ["p"], NOW)
    results = {r.job_id: r for r in store.cancel(["p", "f", "r", "c", "d", "nope"], NOW + 1)}
    assert {k: r.result for k, r in results.items()} == {
        "p": "cancelled", "f": "cancelled", "r": "requested", "c": "error", "d": "error", "nope": "error"}
    assert results["r"].worker == "w1"
    assert "completed; only pending, blocked, failed and processing" in results["c"].message
    assert results["nope"].message == "no job with id 'nope'"
    assert [store.get_job(j).state for j in ("p", "f", "r", "c", "d")] == [
        JobState.CANCELLED, JobState.CANCELLED, JobState.PROCESSING, JobState.COMPLETED, JobState.DEAD]
    assert store.cancel_requests(w) == ["r"]
    assert not store.has_work([], NOW + 100)  # a cancelled retry is no work


def test_a_cancelled_running_job_ends_cancelled_unless_it_succeeded_first(store):
    for job_id in ("killed", "finished", "lost", "forced"):
        add(store, id=job_id)
    w = register(store, slots=4)
    claim(store, w, [], 4, NOW)
    store.cancel(["killed", "finished", "lost", "forced"], NOW)
    assert finish(store, w, [bad("killed", -15), ok("finished")], NOW) == [JobState.CANCELLED, JobState.COMPLETED]
    killed = store.get_job("killed", output=True)
    assert (killed.last_error, killed.stderr) == ("exit code -15", b"boom")  # its output is kept
    requeue(store, w, ["forced"], NOW)  # a second stop signal: a cancelled job does not go back to pending
    assert store.get_job("forced").state == JobState.CANCELLED
    assert store.recover(w, store.worker_by_name("w1").seen, NOW) == [("lost", JobState.CANCELLED)]
    assert not store.has_work([], NOW + 3600)


def test_cancel_matching_and_retry_of_cancelled_and_dead(store):
    add(store, id="a", queue="q1")
    add(store, id="b", queue="q1")
    add(store, id="c", queue="q2")
    assert [r.job_id for r in store.cancel_matching("q1", [JobState.PENDING], NOW)] == ["a", "b"]
    assert store.get_job("c").state == JobState.PENDING
    with pytest.raises(Conflict, match="c' is pending, not dead or cancelled"):
        store.retry(["a", "c"], NOW)
    assert store.get_job("a").state == JobState.CANCELLED  # all or none
    with pytest.raises(Conflict, match="not dead; only dead"):
        store.dlq_retry(["a"], NOW)
    store.retry(["a", "b"], Instant(NOW, 5.0, A))
    assert [store.get_job(j).state for j in "ab"] == [JobState.PENDING, JobState.PENDING]


def test_paused_queues_are_not_claimed_and_hold_no_burst(store):
    add(store, id="a", queue="q1")
    add(store, id="b", queue="q2")
    assert store.set_paused(["q1", "q3"], True, NOW) == [True, True]
    assert store.set_paused(["q1"], True, NOW + 1) == [False]
    assert store.paused_queues() == {"q1": NOW, "q3": NOW}
    w = register(store, slots=2)
    assert [j.id for j in claim(store, w, [], 2, NOW)] == ["b"]
    assert not store.has_work([], NOW)  # only paused work is left
    assert store.set_paused(["q1", "q2"], False, NOW) == [True, False]
    assert [j.id for j in claim(store, w, [], 2, NOW)] == ["a"]


def test_run_outcomes_are_counted_and_survive_the_jobs(store):
    for job_id in ("ok", "retry", "dead", "lost", "gone"):
        add(store, id=job_id, max_retries=0 if job_id == "dead" else 3)
    w = register(store, slots=5)
    claim(store, w, [], 5, NOW)
    store.cancel(["gone"], NOW)
    finish(store, w, [ok("ok"), bad("retry"), bad("dead"), bad("gone")], NOW)
    store.recover(w, store.worker_by_name("w1").seen, NOW)
    assert store.run_counts() == {"default": {"completed": 1, "failed": 1, "dead": 1, "cancelled": 1,
                                              "recovered": 1}}
    store.c.execute("DELETE FROM jobs")
    assert store.counts() == {}
    assert sum(store.run_counts()["default"].values()) == 5
    store.maintain(w)  # on PostgreSQL, folds the counters' deltas: the totals stay
    assert store.counts() == {}
    assert sum(store.run_counts()["default"].values()) == 5


# -- retention ----------------------------------------------------------------------------------------------


def _finished(store, specs):
    """Jobs finished at NOW: {id: (queue, "ok" | "fail" | "dead" | "cancel")}."""
    for job_id, (queue, how) in specs.items():
        add(store, id=job_id, queue=queue, max_retries=0 if how == "dead" else 3)
    w = register(store, slots=len(specs))
    claim(store, w, [], len(specs), NOW)
    store.cancel([j for j, (_, how) in specs.items() if how == "cancel"], NOW)
    finish(store, w, [ok(j) if how == "ok" else bad(j) for j, (_, how) in specs.items()], NOW)


def test_purge_deletes_old_finished_jobs_only(store):
    _finished(store, {"c1": ("q", "ok"), "c2": ("other", "ok"), "d1": ("q", "dead"), "x1": ("q", "cancel"),
                      "f1": ("q", "fail")})
    add(store, id="p1")
    ages = {"completed": 10, "dead": 10, "cancelled": 10}
    assert store.count_purgeable(ages, NOW + 5) == 0  # not old enough yet
    assert store.count_purgeable(ages, NOW + 11) == 4
    assert store.purge({"completed": 10}, NOW + 11, queue="q") == 1
    assert store.purge(ages, NOW + 11, limit=2) == 2  # a bounded batch
    assert store.purge(ages, NOW + 11) == 1
    assert sorted(j.id for j in store.list_jobs()) == ["f1", "p1"]  # failed and pending stay
    assert store.counts() == {"q": {"failed": 1}, "default": {"pending": 1}}
    assert store.c.execute("SELECT count(*) FROM job_output").fetchone()[0] == 1  # only f1's is left
    assert store.run_counts() == {"other": {"completed": 1},  # counters outlive the jobs
                                  "q": {"cancelled": 1, "completed": 1, "dead": 1, "failed": 1}}
    with pytest.raises(InvalidInput, match="not failed"):
        store.purge({"failed": 0}, NOW + 11)
    add(store, id="c1")  # a purged job's id can be used again
    assert store.get_job("c1").state == JobState.PENDING


def test_one_retention_lease_holder_at_a_time(store):
    a, b = register(store, "a"), register(store, "b")
    assert store.take_lease("retention", a, NOW, 60)
    assert not store.take_lease("retention", b, NOW + 1, 60)
    assert store.take_lease("retention", a, NOW + 30, 60)  # renewed
    assert store.take_lease("retention", b, NOW + 91, 60)  # expired: taken over
    store.deregister(b)
    assert store.take_lease("retention", a, NOW + 92, 60)  # its holder is gone




def test_both_engines_implement_the_documented_interface_with_its_parameters():
    import inspect

    from queuectl.store import Store
    from queuectl.store.postgres import PostgresStore
    from queuectl.store.sqlite import SqliteStore

    documented = {n: getattr(Store, n) for n in dir(Store)  # its own and its parts' (store.interface)
                  if not n.startswith("_") and callable(getattr(Store, n))}
    assert len(documented) > 30
    for engine in (SqliteStore, PostgresStore):
        for name, f in documented.items():
            impl = getattr(engine, name, None)
            assert callable(impl), f"{engine.__name__} lacks {name}"
            assert list(inspect.signature(impl).parameters) == list(inspect.signature(f).parameters), (
                engine.__name__, name)


# -- idempotency keys -------------------------------------------------------------------------------


def keyed(job_id: str, key: str = "k"):
    return parse_job(json.dumps({"id": job_id, "command": "true", "key": key}), NOW)


def test_a_held_key_adds_nothing_and_names_its_holder_until_the_holder_ends(store):
    assert store.enqueue([keyed("a")], NOW) == [Enqueued("a")]
    assert store.enqueue([keyed("b")], NOW) == [Enqueued("a", JobState.PENDING)]
    w = register(store)
    claim(store, w, [], 1, NOW)
    assert store.enqueue([keyed("b")], NOW) == [Enqueued("a", JobState.PROCESSING)]
    finish(store, w, [bad("a")], NOW)  # failed, waiting for its retry: still holds the key
    assert store.enqueue([keyed("b")], NOW) == [Enqueued("a", JobState.FAILED)]
    claim(store, w, [], 1, NOW + 100)
    finish(store, w, [ok("a")], NOW + 100)
    assert store.enqueue([keyed("b")], NOW + 100) == [Enqueued("b")]  # a ended: the key is free
    assert (store.get_job("a").key, store.get_job("b").key) == ("k", "k")
    assert store.counts() == {"default": {"completed": 1, "pending": 1}}


def test_keys_in_one_batch_are_matched_in_order_and_other_jobs_keep_their_place(store):
    got = store.enqueue([keyed("a", "x"), parse_job('{"id": "plain", "command": "true"}', NOW), keyed("b", "x"),
                         keyed("c", "y")], NOW)
    assert got == [Enqueued("a"), Enqueued("plain"), Enqueued("a", JobState.PENDING), Enqueued("c")]
    w = register(store, slots=3)
    assert [j.id for j in claim(store, w, [], 3, NOW)] == ["a", "plain", "c"]  # enqueue order
    with pytest.raises(DuplicateJob):  # an id that exists is refused, key or not, and nothing is added
        store.enqueue([keyed("d", "z"), keyed("a", "fresh")], NOW)
    with pytest.raises(NotFound):
        store.get_job("d")


def test_a_dead_or_cancelled_job_frees_its_key_and_is_not_retried_while_another_holds_it(store):
    store.enqueue([keyed("first")], NOW)
    store.cancel(["first"], NOW)
    assert store.enqueue([keyed("second")], NOW) == [Enqueued("second")]
    with pytest.raises(Conflict, match="key 'k' is held by job 'second' \\(pending\\)"):
        store.retry(["first"], NOW)
    assert store.get_job("first").state == JobState.CANCELLED
    store.cancel(["second"], NOW)
    store.retry(["first"], NOW)
    assert store.get_job("first").state == JobState.PENDING
