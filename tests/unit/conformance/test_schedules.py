"""Schedules, on both engines through the interface: each slot fires once across every worker on the store's
clock, cron rules at their wall times as the clock steps, one catch-up run after a stretch with no worker,
overlap (skip or allow, a template key shared with jobs enqueued by hand), pause and resume, add and replace."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from queuectl.domain.errors import Conflict
from queuectl.domain.jobspec import parse_template
from queuectl.domain.models import JobState
from queuectl.domain.recurrence import parse_rule, slot_id
from queuectl.store import open_store
from support.worker_steps import add, at, claim, finish, ok, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=ZoneInfo("UTC")).timestamp()




def add_schedule(store, name="tick", cron=None, every=None, zone="UTC", overlap="skip", now=T0, replace=False,
                 **template):
    template.setdefault("command", "true")
    rule = parse_rule(cron, every, zone)
    return store.add_schedule(name, rule, parse_template(json.dumps(template), overlap == "allow"), overlap, at(now),
                              replace=replace)


def run_ids(store) -> list[str]:
    return sorted(j.id for j in store.list_jobs(limit=1000))


def fire(store, wall):
    fired, _ = store.fire_schedules(at(wall))
    return [(f.schedule, f.job_id, f.outcome) for f in fired]


def test_each_slot_fires_once_on_the_stores_clock(store):
    add_schedule(store, every="2s", queue="q")
    assert fire(store, T0 + 1.9) == []  # not yet due
    assert fire(store, T0 + 2.0) == [("tick", "tick@2026-12-02T10:00:02Z", "added")]
    assert fire(store, T0 + 2.5) == []  # fired already; a clock stepped back fires nothing again
    assert fire(store, T0 + 1.0) == []
    job = store.get_job("tick@2026-12-02T10:00:02Z")
    assert (job.queue, job.command, job.state, job.key) == ("q", "true", JobState.PENDING, "schedule:tick")
    w = register(store)
    claim(store, w, [], 1, T0 + 3)
    finish(store, w, [ok(job.id)], T0 + 3)
    assert fire(store, T0 + 4.2) == [("tick", "tick@2026-12-02T10:00:04Z", "added")]
    (s,) = store.schedules()
    assert (s.next_at, s.last_job, s.last_state, s.skipped, s.fired_at) == (T0 + 6, "tick@2026-12-02T10:00:04Z",
                                                                          JobState.PENDING, 0, T0 + 4.2)


def test_a_cron_schedule_fires_at_its_wall_times_as_the_clock_steps(store):
    add_schedule(store, name="berlin", cron="15 11 * * *", zone="Europe/Berlin")  # 10:15 UTC in winter
    add_schedule(store, name="quarter", cron="*/15 * * * *", overlap="allow")
    assert fire(store, T0 + 14 * 60) == []
    assert sorted(fire(store, T0 + 15 * 60)) == [("berlin", "berlin@2026-12-02T10:15:00Z", "added"),
                                                 ("quarter", "quarter@2026-12-02T10:15:00Z", "added")]
    assert fire(store, T0 + 29 * 60) == []
    assert fire(store, T0 + 30 * 60 + 0.4) == [("quarter", "quarter@2026-12-02T10:30:00Z", "added")]
    assert {s.name: s.next_at for s in store.schedules()} == {"berlin": T0 + 86400 + 15 * 60, "quarter": T0 + 45 * 60}


def test_many_workers_firing_at_once_add_each_slot_once(store, db):
    add_schedule(store, every="1s", overlap="allow")
    errors, fired = [], []

    def firer(offset):
        try:
            with open_store(db) as s:  # a connection of each thread's own, as each worker has
                for step in range(1, 16):
                    fired.extend(s.fire_schedules(at(T0 + step + offset))[0])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=firer, args=(i * 0.01,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ids = run_ids(store)
    assert sorted(f.job_id for f in fired if f.outcome == "added") == ids  # no slot added twice
    assert ids[-1] == slot_id("tick", T0 + 15) and {f.outcome for f in fired} <= {"added", "exists"}
    # Every slot was fired, or passed unfired while another firer held the schedule (a catch-up run stands for it).
    covered = {f.slot for f in fired if f.outcome == "added"}
    for f in fired:
        if f.outcome == "added" and f.missed:
            covered |= {float(t) for t in range(int(f.missed[0]), int(f.missed[1]))}
    assert covered == {T0 + step for step in range(1, 16)}


def test_a_stretch_with_no_worker_gives_one_catch_up_run_for_the_last_slot(store):
    add_schedule(store, every="2s", overlap="allow")
    fired, _ = store.fire_schedules(at(T0 + 10.5))  # five slots passed: 2, 4, 6, 8, 10
    assert [(f.job_id, f.outcome, f.missed) for f in fired] == [("tick@2026-12-02T10:00:10Z", "added", (T0 + 2,
                                                                                                     T0 + 10))]
    assert run_ids(store) == ["tick@2026-12-02T10:00:10Z"]
    assert store.schedules()[0].next_at == T0 + 12
    store.remove_schedules(["tick"])
    add_schedule(store, name="daily", cron="0 3 * * *", now=T0)  # down for three days and a bit
    assert fire(store, T0 + 3 * 86400 + 60) == [("daily", "daily@2026-12-05T03:00:00Z", "added")]


def test_overlap_skip_counts_a_slot_whose_previous_run_has_not_ended(store):
    add_schedule(store, every="1s")
    assert fire(store, T0 + 1) == [("tick", slot_id("tick", T0 + 1), "added")]
    w = register(store)
    claim(store, w, [], 1, T0 + 1.5)  # the run is processing
    fired, _ = store.fire_schedules(at(T0 + 2))
    assert [(f.outcome, f.holder) for f in fired] == [("skipped", slot_id("tick", T0 + 1))]
    finish(store, w, [ok(slot_id("tick", T0 + 1))], T0 + 2.5)
    assert fire(store, T0 + 3) == [("tick", slot_id("tick", T0 + 3), "added")]
    (s,) = store.schedules()
    assert (s.skipped, s.last_job) == (1, slot_id("tick", T0 + 3))
    assert run_ids(store) == [slot_id("tick", T0 + 1), slot_id("tick", T0 + 3)]


def test_a_template_key_is_the_overlap_key_shared_with_jobs_enqueued_by_hand(store):
    add(store, id="manual", key="backup")
    add_schedule(store, name="nightly", every="1m", key="backup")
    fired, _ = store.fire_schedules(at(T0 + 60))
    assert [(f.outcome, f.holder) for f in fired] == [("skipped", "manual")]


def test_overlap_allow_runs_side_by_side(store):
    add_schedule(store, every="1s", overlap="allow")
    for step in (1, 2, 3):
        fire(store, T0 + step)
    assert run_ids(store) == [slot_id("tick", T0 + s) for s in (1, 2, 3)]
    assert {store.get_job(i).key for i in run_ids(store)} == {None}


def test_pause_fires_nothing_and_resume_gives_no_catch_up(store):
    add_schedule(store, every="10s")
    assert store.set_schedules_paused(["tick", "nope"], True, at(T0 + 1)) == [True, None]
    assert store.set_schedules_paused(["tick"], True, at(T0 + 1)) == [False]
    assert fire(store, T0 + 100) == []
    assert store.set_schedules_paused(["tick"], False, at(T0 + 101)) == [True]
    assert store.schedules()[0].next_at == T0 + 110
    assert fire(store, T0 + 110) == [("tick", slot_id("tick", T0 + 110), "added")]


def test_add_refuses_a_name_taken_and_replace_keeps_its_history(store):
    add_schedule(store, every="1s")
    fire(store, T0 + 1)
    with pytest.raises(Conflict, match="exists already"):
        add_schedule(store, every="5s", now=T0 + 1.5)
    assert store.schedules()[0].expr == "1"
    s = add_schedule(store, cron="0 * * * *", now=T0 + 1.5, replace=True, command="echo new")
    assert (s.kind, s.next_at, s.last_job, s.template) == ("cron", T0 + 3600, slot_id("tick", T0 + 1),
                                                           {"command": "echo new"})
    assert store.remove_schedules(["tick", "tick"]) == [True, False]
    assert store.schedules() == [] and run_ids(store) == [slot_id("tick", T0 + 1)]  # its runs stay


def test_a_slot_whose_job_exists_already_adds_nothing(store):
    add(store, id=slot_id("tick", T0 + 1), command="echo by hand")
    add_schedule(store, every="1s", overlap="allow")
    assert fire(store, T0 + 1) == [("tick", slot_id("tick", T0 + 1), "exists")]
    assert store.get_job(slot_id("tick", T0 + 1)).command == "echo by hand"
