"""Activity history (queuectl.store.activity, read through queuectl.api.history) on SQLite and PostgreSQL: every path of a
job's change counted once, exactly, also when an exchange is sent again; the wait and run buckets and their
percentiles; retention by keep-history with totals that never go down; an existing database upgraded."""

import pytest

from queuectl.api.history import HistoryRow, history, quantile, rates, window
from queuectl.domain.errors import InvalidInput
from queuectl.domain.models import JobState
from queuectl.store import open_store
from queuectl.store.request import Exchange, Outcome, Running
from queuectl.store.activity import BOUNDS, added
from queuectl.worker.duties.retention import Retention
from support.worker_steps import add, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES

#: A minute's start (Unix seconds, just after support.worker_steps.NOW): the tests' times stay within it unless
#: they say otherwise.
T0 = 1_000_020.0


def counts(row) -> tuple:
    return (row.started, row.completed, row.failed, row.dead, row.cancelled, row.recovered)


def rounded(rows) -> list:
    """`rows` (ActivityRows) with their sums of seconds rounded to a microsecond: sums added in another order."""
    return [r._replace(wait_sum=round(r.wait_sum, 6), run_sum=round(r.run_sum, 6)) for r in rows]


def one_minute(store) -> HistoryRow:
    [row] = history(store, since=120, now=T0 + 59)
    assert row.at == T0
    return row


def ran(store, runs) -> None:
    """Enqueue `runs` (id, queue, start, seconds) due at T0, claim them at T0 and end each at its start + seconds,
    started then, in an exchange of its own; fold PostgreSQL's deltas."""
    w = register(store)
    for job_id, queue, _, _ in runs:
        add(store, T0, id=job_id, queue=queue)
    store.exchange(w, Exchange(claim=len(runs)), [], T0)
    for job_id, _, start, seconds in runs:
        store.exchange(w, Exchange(ended=[Outcome(job_id, True, 0, None, started_at=start, ended_at=start + seconds)]),
                       [], start + seconds)
    store.maintain(w)


def test_every_path_of_a_change_counts_once_exactly(store):
    for job_id in ("ok1", "ok2", "cancel-run", "released"):
        add(store, T0, id=job_id)
    add(store, T0, id="retry", max_retries=1)
    add(store, T0, id="parent", max_retries=0)
    add(store, T0, id="child", after=["parent"])
    add(store, T0, id="pending")
    add(store, T0, id="lost", queue="other")
    w, w2 = register(store), register(store, "w2", queues=["other"])
    claimed = store.exchange(w2, Exchange(claim=1, running=[]), ["other"], T0 + 1).jobs
    store.exchange(w2, Exchange(running=[Running("lost", T0 + 2)]), ["other"], T0 + 2)
    assert [j.id for j in claimed] == ["lost"]
    got = {j.id for j in store.exchange(w, Exchange(claim=6), ["default"], T0 + 1).jobs}
    assert got == {"ok1", "ok2", "cancel-run", "released", "retry", "parent"}
    store.cancel(["pending", "released"], T0 + 1)  # pending: cancelled at once; claimed: a cancel requested
    started = [Running(j, T0 + 2) for j in ("ok1", "ok2", "cancel-run", "retry", "parent")]
    store.exchange(w, Exchange(running=started, release=["released"]), [], T0 + 2)  # given back: cancelled
    store.cancel(["cancel-run"], T0 + 3)  # running: its worker stops it, and its end lands as cancelled
    ends = Exchange(ended=[Outcome("ok1", True, 0, None, ended_at=T0 + 2.3), Outcome("ok2", True, 0, None, ended_at=T0 + 4),
                           Outcome("retry", False, 1, "exit code 1", ended_at=T0 + 5),
                           Outcome("parent", False, 1, "exit code 1", ended_at=T0 + 5),
                           Outcome("cancel-run", False, -15, "cancelled", ended_at=T0 + 5)])
    store.exchange(w, ends, [], T0 + 6)
    store.exchange(w, ends, [], T0 + 7)  # sent again (its commit unknown): changes nothing
    store.exchange(w, Exchange(running=started), [], T0 + 7)
    info = store.worker_by_name("w2")
    assert store.recover(w2, info.seen, T0 + 8) == [("lost", JobState.FAILED)]
    states = {j: store.get_job(j).state.value for j in ("ok1", "retry", "parent", "child", "cancel-run", "released",
                                                         "pending", "lost")}
    assert states == {"ok1": "completed", "retry": "failed", "parent": "dead", "child": "cancelled",
                      "cancel-run": "cancelled", "released": "cancelled", "pending": "cancelled", "lost": "failed"}
    store.maintain(w)
    rows = history(store, since=120, now=T0 + 59)
    assert [(r.queue, counts(r)) for r in rows] == [("default", (5, 2, 1, 1, 4, 0)), ("other", (1, 0, 0, 0, 0, 1))]
    [total] = history(store, since=120, now=T0 + 59, by_queue=False)
    assert (total.queue, counts(total)) == ("", (6, 2, 1, 1, 4, 1))
    # waits: the six starts, 2 s after they were due (T0); runs: the five ends of started jobs
    # all in (1, 2.5]: 1 + 1.5 * rank / n, rank = q * n
    assert (total.wait_p50, total.wait_p95) == (pytest.approx(1.75), pytest.approx(2.425))
    totals = store.activity_totals()
    assert sum(totals["default"].wait) == 5 and totals["default"].wait_sum == pytest.approx(10.0)
    assert sum(totals["default"].run) == 5 and totals["default"].run_sum == pytest.approx(0.3 + 2 + 3 + 3 + 3)
    assert sum(totals["other"].run) == 0  # a recovered run's end is not known: no run time


def test_the_hot_path_sent_again_counts_once(store):
    add(store, T0, id="a")
    add(store, T0, id="b")
    w = register(store)
    store.exchange(w, Exchange(claim=2), [], T0)
    for _ in range(2):  # a start with its end, all successes: PostgreSQL's one-statement exchange
        store.exchange(w, Exchange(ended=[Outcome("a", True, 0, None, started_at=T0 + 1, ended_at=T0 + 2)],
                                   running=[Running("b", T0 + 1)]), [], T0 + 2)
    assert counts(one_minute(store)) == (2, 1, 0, 0, 0, 0)
    store.maintain(w)
    assert counts(one_minute(store)) == (2, 1, 0, 0, 0, 0)  # PostgreSQL's deltas folded: the same


def test_a_start_counts_in_the_minute_the_store_recorded_it_and_the_end_in_its_own(store):
    add(store, T0, id="a")
    w = register(store)
    store.exchange(w, Exchange(claim=1), [], T0)
    store.exchange(w, Exchange(running=[Running("a", T0 + 1)]), [], T0 + 1)
    store.exchange(w, Exchange(ended=[Outcome("a", True, 0, None, ended_at=T0 + 90)]), [], T0 + 90)
    rows = history(store, since=300, now=T0 + 100)
    assert [(r.at, counts(r), r.run_p50) for r in rows] == [
        (T0, (1, 0, 0, 0, 0, 0), None), (T0 + 60, (0, 1, 0, 0, 0, 0), pytest.approx(180.0))]  # 89 s: in (60, 300], its middle
    [hour] = history(store, since=300, step=3600, now=T0 + 100)
    assert (hour.at, counts(hour)) == (T0 // 3600 * 3600, (1, 1, 0, 0, 0, 0))


def test_window_gives_the_minutes_and_each_queues_span_with_percentiles_over_all_of_it(store):
    """`queuectl top`'s read: nine short runs in one minute and one long run in the next; the span's p50 is a
    short run's (the newest minute alone would give the long run's)."""
    runs = [(f"s{i}", "default", T0 + 10, 0.3) for i in range(9)] + [("long", "default", T0 + 70, 7.0),
                                                                       ("o", "other", T0 + 10, 1.0)]
    ran(store, runs)
    minutes, spans = window(store, since=3600, now=T0 + 100)
    assert minutes == history(store, since=3600, now=T0 + 100)
    assert [(r.at, r.queue, r.completed) for r in minutes] == [(T0, "default", 9), (T0, "other", 1),
                                                                (T0 + 60, "default", 1)]
    assert minutes[-1].run_p50 > 5.0  # the newest minute alone: the long run
    assert sorted(spans) == ["default", "other"]
    hour = spans["default"]
    assert (hour.at, hour.completed, hour.started) == ((T0 + 100 - 3600) // 60 * 60, 10, 10)
    assert 0.25 <= hour.run_p50 <= 0.5 and 5.0 <= hour.run_p95 <= 10.0
    assert spans["other"].completed == 1 and 0.5 <= spans["other"].run_p50 <= 1.0
    assert window(store, since=30, now=T0 + 100)[1]["default"].completed == 1  # from the minute T0 + 70 falls in
    with pytest.raises(InvalidInput):
        window(store, since=-1)


def test_the_store_sums_the_minutes_into_hours_exactly(store):
    """A week's chart reads hours that the database summed (168 rows a queue, not 10,080 minutes): each hour's row is
    its minutes summed here, buckets and sums included, across four hours and two queues."""
    hour0 = T0 // 3600 * 3600
    runs = [(f"j{i}", "other" if i % 3 else "default", T0 + 1300 * i + 7, 0.2 * i) for i in range(9)]  # 4 hours
    ran(store, runs)
    end = hour0 + 4 * 3600
    minutes = store.activity(hour0, end)
    hours = store.activity(hour0, end, step=3600)
    assert len({m.minute for m in minutes}) >= 9 and {h.minute for h in hours} == {hour0 + 3600 * k for k in range(4)}
    summed = {}
    for m in minutes:
        key = (m.minute // 3600 * 3600, m.queue)
        summed[key] = added(summed[key], m) if key in summed else m._replace(minute=key[0])
    assert [(h.minute, h.queue) for h in hours] == sorted(summed)
    for h in hours:
        want = summed[(h.minute, h.queue)]
        assert h._replace(wait_sum=0, run_sum=0) == want._replace(wait_sum=0, run_sum=0)
        assert (h.wait_sum, h.run_sum) == (pytest.approx(want.wait_sum), pytest.approx(want.run_sum))
    assert sum(h.completed for h in hours) == len(runs)
    rows = history(store, since=4 * 3600, step=3600, now=end - 1)
    assert [(r.at, r.queue, r.completed) for r in rows] == [(at, q, summed[(at, q)].completed) for at, q in sorted(summed)]
    first = minutes[0].minute  # bounds between whole seconds: the minutes that begin in [since, until)
    assert {m.minute for m in store.activity(first - 0.5, first + 0.5)} == {first}
    assert first not in {m.minute for m in store.activity(first + 0.5, first + 60.5)}
    with pytest.raises(ValueError, match="whole number of minutes"):
        store.activity(hour0, end, step=90)


@pytest.mark.parametrize("runs, bucket", [
    ([0.3] * 10, (0.25, 0.5)), ([0.002] * 3 + [7.0] * 7, (5.0, 10.0)), ([4000.0] * 4, (3600.0, 3600.0))])
def test_percentiles_fall_in_the_bucket_of_the_truth(store, runs, bucket):
    w = register(store)
    for i, seconds in enumerate(runs):
        add(store, T0, id=f"j{i}")
    store.exchange(w, Exchange(claim=len(runs)), [], T0)
    store.exchange(w, Exchange(ended=[Outcome(f"j{i}", True, 0, None, started_at=T0, ended_at=T0 + s)
                                      for i, s in enumerate(runs)]), [], T0 + 5000)
    [row] = history(store, since=60, now=T0 + 5000)
    lo, hi = bucket
    assert lo <= row.run_p50 <= hi and lo <= row.run_p95 <= hi
    assert row.wait_p50 == pytest.approx(0.0025)  # every wait 0: the first bucket's middle


def test_quantile_interpolates_as_prometheus_does():
    assert quantile(0.5, [0] * len(BOUNDS)) is None
    assert quantile(0.5, [2, 2] + [0] * 15) == pytest.approx(0.005)
    assert quantile(0.75, [2, 2] + [0] * 15) == pytest.approx(0.0075)
    assert quantile(0.99, [0] * 16 + [5]) == 3600.0  # the +Inf bucket: the highest finite bound


def test_rates_are_jobs_per_minute_of_the_last_minutes(store):
    w = register(store)
    for minute in range(15):  # one job completed each minute before T0 + 900, two failed in the last
        add(store, T0 + 60 * minute, id=f"ok{minute}")
        store.exchange(w, Exchange(claim=1), [], T0 + 60 * minute)
        store.exchange(w, Exchange(ended=[Outcome(f"ok{minute}", True, 0, None, started_at=T0 + 60 * minute)]), [],
                       T0 + 60 * minute + 1)
    for i in range(2):
        add(store, T0 + 840, id=f"bad{i}", max_retries=5)
    store.exchange(w, Exchange(claim=2), [], T0 + 840)
    store.exchange(w, Exchange(ended=[Outcome(f"bad{i}", False, 1, "exit code 1", started_at=T0 + 840)
                                      for i in range(2)]), [], T0 + 841)
    assert rates(store, now=T0 + 900) == {"1m": {"completed": 1.0, "failed": 2.0},
                                          "5m": {"completed": 1.0, "failed": 0.4},
                                          "15m": {"completed": 1.0, "failed": 0.133}}
    # half a minute on: the oldest minute of each window half in it
    assert rates(store, now=T0 + 930)["1m"] == {"completed": 0.5, "failed": 1.0}


def test_keep_history_bounds_the_rows_and_the_totals_never_go_down(store):
    w = register(store)
    for minute in range(30):
        add(store, T0 + 60 * minute, id=f"j{minute}")
        store.exchange(w, Exchange(claim=1), [], T0 + 60 * minute)
        store.exchange(w, Exchange(ended=[Outcome(f"j{minute}", True, 0, None, started_at=T0 + 60 * minute,
                                                  ended_at=T0 + 60 * minute + 0.5)]), [], T0 + 60 * minute + 1)
    store.maintain(w)
    before = store.activity_totals()
    assert store.purge_history(T0 + 60 * 20, limit=8) == 8  # a batch: the oldest eight minutes
    assert store.purge_history(T0 + 60 * 20, limit=8) == 8
    assert store.purge_history(T0 + 60 * 20, limit=8) == 4
    assert store.purge_history(T0 + 60 * 20, limit=8) == 0
    kept = history(store, since=3600, now=T0 + 1800)
    assert [r.at for r in kept] == [T0 + 60 * m for m in range(20, 30)]
    assert store.activity_totals() == before  # folded into the queue's retired minute
    assert before["default"].completed == 30


def test_the_retention_duty_deletes_history_past_keep_history(store):
    w = register(store)
    add(store, T0, id="a")
    store.exchange(w, Exchange(claim=1), [], T0)
    store.exchange(w, Exchange(ended=[Outcome("a", True, 0, None, started_at=T0)]), [], T0 + 1)
    store.maintain(w)
    forever = {**store.settings(), "keep-history": None, "keep-completed": None, "keep-cancelled": None,
               "keep-dead": None}
    settings = dict(forever)
    duty = Retention(store, lambda: w, lambda: settings, store.now)
    duty.run(0.0)
    hour = T0 // 3600 * 3600  # kept forever, as its hour: T0 lies decades back, past a day of minutes
    assert history(store, since=60, now=T0 + 59) == []
    assert [(r.at, r.completed) for r in history(store, since=3600, step=3600, now=hour + 3599)] == [(hour, 1)]
    settings["keep-history"] = 86400.0
    duty.run(0.0)
    assert history(store, since=3600, step=3600, now=hour + 3599) == []
    assert store.activity_totals()["default"].completed == 1


def test_minutes_older_than_a_day_are_rolled_up_into_hours_exactly(store):
    """Retention keeps a day of minutes (MINUTES_KEPT) and sums older ones into their hour's row, in batches:
    every read over whole hours, and the totals, are what they were; the rows are one an hour and queue."""
    hour0 = T0 // 3600 * 3600
    runs = [(f"j{i}", "other" if i % 3 else "default", T0 + 700 * i + 7, 0.2 * i) for i in range(16)]  # 4 hours
    ran(store, runs)
    end = hour0 + 4 * 3600
    hours, totals = store.activity(hour0, end, step=3600), store.activity_totals()
    minutes = store.activity(hour0, end)
    assert len(minutes) > len(hours)
    cut = T0 + 700 * 9  # within the third hour: its minutes and the later ones stay minutes
    deleted = [store.purge_history(None, cut, limit=3) for _ in range(5)]
    assert deleted[-1] == 0 and len([n for n in deleted if n]) > 1  # in batches of about 3 rows
    assert rounded(store.activity(hour0, end, step=3600)) == rounded(hours)
    assert rounded(store.activity_totals().values()) == rounded(totals.values())
    kept = store.activity(hour0, end)
    rolled = [m for m in kept if m.minute < cut // 3600 * 3600]
    assert {m.minute % 3600 for m in rolled} == {0}  # one row an hour and queue
    assert len(rolled) == len({(m.minute // 3600, m.queue) for m in minutes if m.minute < cut // 3600 * 3600})
    assert [m for m in kept if m.minute >= cut // 3600 * 3600] == [m for m in minutes if m.minute >= cut // 3600 * 3600]
    assert sum(deleted) == len([m for m in minutes if m.minute < cut // 3600 * 3600 and m.minute % 3600])
    assert store.purge_history(None, cut) == 0  # done: nothing left to roll up


def test_bad_history_input_is_refused(store):
    for kwargs, words in [({"step": 300}, "1m or 1h"), ({"since": -1}, "0 s or more"),
                          ({"since": float("nan")}, "0 s or more"), ({"queue": "a b"}, "queue names")]:
        with pytest.raises(InvalidInput, match=words):
            history(store, **kwargs)


def test_an_existing_database_is_upgraded_with_its_history_table(db, monkeypatch):
    import queuectl.store.postgres.store as pg
    import queuectl.store.sqlite.store as lite

    engine = lite if "://" not in db else pg
    current = engine.SCHEMA_VERSION
    monkeypatch.setattr(engine, "SCHEMA_VERSION", current - 1)  # the schema before the history
    with open_store(db) as old:
        add(old, id="a")
        w = register(old)
        old.exchange(w, Exchange(claim=1), [], T0)
    monkeypatch.setattr(engine, "SCHEMA_VERSION", current)
    with open_store(db) as new:
        assert history(new, since=60, now=T0 + 59) == []
        new.exchange(w, Exchange(ended=[Outcome("a", True, 0, None, started_at=T0 + 1)]), [], T0 + 2)
        assert counts(one_minute(new)) == (1, 1, 0, 0, 0, 0)
