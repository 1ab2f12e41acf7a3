"""Schedules (`queuectl schedule`), on SQLite and PostgreSQL, with the store's clock stepped in-process:
slots fire once each however many workers fire them, a missed stretch gives one catch-up run,
overlap is skipped or allowed, pause gives no catch-up; the cron arithmetic across daylight-saving
changes (a library test); and every bad input is one line, exit 2, nothing stored."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_error, snapshot
from queuectl.clock import Instant
from queuectl.errors import Conflict, InvalidInput
from queuectl.jobspec import parse_template
from queuectl.models import JobState
from queuectl.recurrence import local_zone, parse_rule, slot_id
from queuectl.store import open_store
from support.worker_steps import claim, finish, ok, register

BERLIN = ZoneInfo("Europe/Berlin")
#: 2026-12-02T10:00:00Z, a whole hour: the tests' store clock starts here.
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=ZoneInfo("UTC")).timestamp()


@pytest.fixture
def db(backend_db):
    return backend_db


def at(wall: float) -> Instant:
    """The store's clock reading `wall` (the monotonic clock does not matter to schedules)."""
    return Instant(wall, wall, "test-boot")


def add(store, name="tick", cron=None, every=None, zone="UTC", overlap="skip", now=T0, replace=False, **template):
    template.setdefault("command", "true")
    rule = parse_rule(cron, every, zone)
    return store.add_schedule(name, rule, parse_template(json.dumps(template), overlap == "allow"), overlap, at(now),
                              replace=replace)


def run_ids(store) -> list[str]:
    return sorted(j.id for j in store.list_jobs(limit=1000))


def fire(store, wall):
    fired, _ = store.fire_schedules(at(wall))
    return [(f.schedule, f.job_id, f.outcome) for f in fired]


# -- the cron arithmetic (a library test: croniter's fields, this module's zone rules) ----------------


def slots_after(rule, start, n):
    out, t = [], start
    for _ in range(n):
        t = rule.next_after(t)
        out.append(rule.local(t))
    return out


def test_a_wall_time_skipped_by_the_spring_change_runs_an_hour_later_that_night_only():
    rule = parse_rule("30 2 * * *", None, "Europe/Berlin")
    start = datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN).timestamp()
    assert slots_after(rule, start, 3) == ["2026-03-29T03:30:00+02:00", "2026-03-30T02:30:00+02:00",
                                           "2026-03-31T02:30:00+02:00"]
    hourly = parse_rule("@hourly", None, "Europe/Berlin")  # the 23-hour day has 23 runs
    assert slots_after(hourly, datetime(2026, 3, 29, 0, 30, tzinfo=BERLIN).timestamp(), 3) == [
        "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"]


def test_a_wall_time_repeated_by_the_autumn_change_runs_once_unless_the_hour_is_a_wildcard():
    daily = parse_rule("30 2 * * *", None, "Europe/Berlin")
    start = datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN).timestamp()
    assert slots_after(daily, start, 2) == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    every20 = parse_rule("*/20 * * * *", None, "Europe/Berlin")  # keeps its interval through the repeat
    assert slots_after(every20, datetime(2026, 10, 25, 2, 50, tzinfo=BERLIN).timestamp(), 4) == [
        "2026-10-25T02:00:00+01:00", "2026-10-25T02:20:00+01:00", "2026-10-25T02:40:00+01:00",
        "2026-10-25T03:00:00+01:00"]
    midnight = parse_rule("@daily", None, "Europe/Berlin")
    assert slots_after(midnight, start, 2) == ["2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00"]


def test_last_until_mirrors_next_after_across_a_change():
    rule = parse_rule("*/20 * * * *", None, "Europe/Berlin")
    t = datetime(2026, 10, 25, 1, 50, tzinfo=BERLIN).timestamp()
    for _ in range(12):
        nxt = rule.next_after(t)
        assert rule.last_until(nxt) == nxt and rule.last_until(nxt - 1) <= t
        t = nxt


FIELDS = (["*", "*/5", "0", "30", "0,30", "15-45/15"], ["*", "*/2", "2", "0-6", "1,13"], ["*", "1", "15", "*/10"],
          ["*", "3", "10", "*/3"], ["*", "0", "1-5"])
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago"]


@settings(max_examples=150, deadline=None)
@given(st.tuples(*(st.sampled_from(f) for f in FIELDS)), st.sampled_from(ZONES),
       st.integers(min_value=1_577_836_800, max_value=1_893_456_000))  # 2020 to 2030
def test_next_after_and_last_until_agree_and_leave_no_slot_between(fields, zone, t):
    """For generated cron expressions, zones (with changes of 1 h, 30 min, and none) and instants: the next
    slot is later, is a slot, and no slot lies between the instant and it."""
    rule = parse_rule(" ".join(fields), None, zone)
    nxt = rule.next_after(t)
    assert nxt > t and nxt == int(nxt)
    assert rule.last_until(nxt) == nxt
    assert rule.last_until(nxt - 1) <= t


def test_intervals_are_multiples_since_the_epoch_and_zones_do_not_move_them():
    a, b = parse_rule(None, "5m", "UTC"), parse_rule(None, "5m", "Asia/Kolkata")
    t = T0 + 61
    assert a.next_after(t) == b.next_after(t) == T0 + 300
    assert a.last_until(T0 + 300) == T0 + 300 and a.text == "every 5m"
    assert slot_id("tick", T0 + 300) == "tick@2026-12-02T10:05:00Z"


def test_the_host_zone_is_the_default_and_is_an_iana_name(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    assert local_zone() == "America/New_York" and parse_rule("@daily", None, None).zone == "America/New_York"


def test_the_host_zone_falls_back_to_localtime_then_timezone_then_utc(monkeypatch, tmp_path):
    """A $TZ that names no zone is passed over for /etc/localtime's link, then /etc/timezone, then UTC."""
    from queuectl import recurrence
    localtime, timezone = tmp_path / "localtime", tmp_path / "timezone"
    monkeypatch.setattr(recurrence, "LOCALTIME", str(localtime))
    monkeypatch.setattr(recurrence, "TIMEZONE_FILE", str(timezone))
    monkeypatch.setenv("TZ", "Not/AZone")
    assert local_zone() == "UTC"
    timezone.write_text("Asia/Tokyo\n")
    assert local_zone() == "Asia/Tokyo"
    localtime.symlink_to("/usr/share/zoneinfo/Europe/Berlin")
    assert local_zone() == "Europe/Berlin"
    monkeypatch.setenv("TZ", ":Australia/Sydney")
    assert local_zone() == "Australia/Sydney"
    monkeypatch.delenv("TZ")
    localtime.unlink()
    localtime.symlink_to(tmp_path / "nowhere")  # a dangling link: no zone in its target
    assert local_zone() == "Asia/Tokyo"


@pytest.mark.parametrize("cron,every,zone,fragment", [
    ("61 * * * *", None, "UTC", "not a valid cron expression"),
    ("* * *", None, "UTC", "five fields"),
    ("* * * * * *", None, "UTC", "five fields"),
    ("@reboot", None, "UTC", "unknown cron alias"),
    ("0 0 30 2 *", None, "UTC", "never matches"),
    (None, "0", "UTC", "at least 1s"),
    (None, "1.5s", "UTC", "whole number"),
    (None, "forever", "UTC", "whole number"),
    (None, "-5s", "UTC", "--every"),
    ("* * * * *", "1m", "UTC", "one of them"),
    (None, None, "UTC", "one of them"),
    (None, "1m", "Mars/Olympus", "unknown time zone"),
    (None, "1m", "/etc/passwd", "unknown time zone"),
])
def test_bad_rules_are_refused(cron, every, zone, fragment):
    with pytest.raises(InvalidInput, match=fragment.replace("-", r"\-")):
        parse_rule(cron, every, zone)


# -- firing, on both engines ----------------------------------------------------------------------------


def test_each_slot_fires_once_on_the_stores_clock(store):
    add(store, every="2s", queue="q")
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
    add(store, name="berlin", cron="15 11 * * *", zone="Europe/Berlin")  # 10:15 UTC in winter
    add(store, name="quarter", cron="*/15 * * * *", overlap="allow")
    assert fire(store, T0 + 14 * 60) == []
    assert sorted(fire(store, T0 + 15 * 60)) == [("berlin", "berlin@2026-12-02T10:15:00Z", "added"),
                                                 ("quarter", "quarter@2026-12-02T10:15:00Z", "added")]
    assert fire(store, T0 + 29 * 60) == []
    assert fire(store, T0 + 30 * 60 + 0.4) == [("quarter", "quarter@2026-12-02T10:30:00Z", "added")]
    assert {s.name: s.next_at for s in store.schedules()} == {"berlin": T0 + 86400 + 15 * 60, "quarter": T0 + 45 * 60}


def test_many_workers_firing_at_once_add_each_slot_once(store, db):
    add(store, every="1s", overlap="allow")
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
    add(store, every="2s", overlap="allow")
    fired, _ = store.fire_schedules(at(T0 + 10.5))  # five slots passed: 2, 4, 6, 8, 10
    assert [(f.job_id, f.outcome, f.missed) for f in fired] == [("tick@2026-12-02T10:00:10Z", "added", (T0 + 2,
                                                                                                     T0 + 10))]
    assert run_ids(store) == ["tick@2026-12-02T10:00:10Z"]
    assert store.schedules()[0].next_at == T0 + 12
    store.remove_schedules(["tick"])
    add(store, name="daily", cron="0 3 * * *", now=T0)  # down for three days and a bit
    assert fire(store, T0 + 3 * 86400 + 60) == [("daily", "daily@2026-12-05T03:00:00Z", "added")]


def test_overlap_skip_counts_a_slot_whose_previous_run_has_not_ended(store):
    add(store, every="1s")
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
    from support.worker_steps import add as add_job

    add_job(store, id="manual", key="backup")
    add(store, name="nightly", every="1m", key="backup")
    fired, _ = store.fire_schedules(at(T0 + 60))
    assert [(f.outcome, f.holder) for f in fired] == [("skipped", "manual")]


def test_overlap_allow_runs_side_by_side(store):
    add(store, every="1s", overlap="allow")
    for step in (1, 2, 3):
        fire(store, T0 + step)
    assert run_ids(store) == [slot_id("tick", T0 + s) for s in (1, 2, 3)]
    assert {store.get_job(i).key for i in run_ids(store)} == {None}


def test_pause_fires_nothing_and_resume_gives_no_catch_up(store):
    add(store, every="10s")
    assert store.set_schedules_paused(["tick", "nope"], True, at(T0 + 1)) == [True, None]
    assert store.set_schedules_paused(["tick"], True, at(T0 + 1)) == [False]
    assert fire(store, T0 + 100) == []
    assert store.set_schedules_paused(["tick"], False, at(T0 + 101)) == [True]
    assert store.schedules()[0].next_at == T0 + 110
    assert fire(store, T0 + 110) == [("tick", slot_id("tick", T0 + 110), "added")]


def test_add_refuses_a_name_taken_and_replace_keeps_its_history(store):
    add(store, every="1s")
    fire(store, T0 + 1)
    with pytest.raises(Conflict, match="exists already"):
        add(store, every="5s", now=T0 + 1.5)
    assert store.schedules()[0].expr == "1"
    s = add(store, cron="0 * * * *", now=T0 + 1.5, replace=True, command="echo new")
    assert (s.kind, s.next_at, s.last_job, s.template) == ("cron", T0 + 3600, slot_id("tick", T0 + 1),
                                                           {"command": "echo new"})
    assert store.remove_schedules(["tick", "tick"]) == [True, False]
    assert store.schedules() == [] and run_ids(store) == [slot_id("tick", T0 + 1)]  # its runs stay


def test_a_slot_whose_job_exists_already_adds_nothing(store):
    from support.worker_steps import add as add_job

    add_job(store, id=slot_id("tick", T0 + 1), command="echo by hand")
    add(store, every="1s", overlap="allow")
    assert fire(store, T0 + 1) == [("tick", slot_id("tick", T0 + 1), "exists")]
    assert store.get_job(slot_id("tick", T0 + 1)).command == "echo by hand"


# -- the command line -----------------------------------------------------------------------------------


def test_schedule_commands_add_list_pause_resume_rm(run_cli):
    r = run_cli("schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
                '{"command":"backup.sh","queue":"maint"}')
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("nightly: 30 2 * * * (Europe/Berlin); next run ") and "T02:30:00+01:00" in r.stdout
    (s,) = run_cli.json("schedule", "list")
    assert (s["name"], s["cron"], s["zone"], s["overlap"], s["paused"], s["template"], s["last_job"]) == (
        "nightly", "30 2 * * *", "Europe/Berlin", "skip", False, {"command": "backup.sh", "queue": "maint"}, None)
    assert_error(run_cli("schedule", "add", "nightly", "--every", "1h", '{"command":"x"}'), 1, "exists already",
                 "--replace")
    assert run_cli("schedule", "add", "nightly", "--every", "1h", "--replace", '{"command":"x"}').exit_code == 0
    assert run_cli.json("schedule", "list")[0]["rule"] == "every 1h"
    r = run_cli("schedule", "pause", "nightly")
    assert (r.exit_code, r.stdout) == (0, "nightly: paused\n")
    (s,) = run_cli.json("schedule", "list")
    assert (s["paused"], s["next_at"], s["next_local"]) == (True, None, None)  # resume sets the next slot
    assert run_cli.json("status")["schedules"] == [s]
    table = run_cli("schedule", "list").stdout
    assert table.splitlines()[0].split()[:3] == ["NAME", "RULE", "ZONE"] and "yes" in table
    r = run_cli("schedule", "resume", "nightly", "ghost")
    assert (r.exit_code, r.stdout) == (1, "nightly: resumed\n") and "no schedule named ghost" in r.stderr
    r = run_cli("schedule", "rm", "nightly")
    assert (r.exit_code, r.stdout) == (0, "nightly: removed\n")
    assert run_cli.json("schedule", "list") == []
    assert_error(run_cli("schedule", "rm", "nightly"), 1, "no schedule named nightly")


@pytest.mark.parametrize("args,fragment", [
    (["--cron", "61 * * * *"], "not a valid cron expression"),
    (["--cron", "* * *"], "five fields"),
    (["--every", "0"], "at least 1s"),
    (["--every", "5m", "--cron", "* * * * *"], "one of them"),
    ([], "one of them"),
    (["--cron", "@daily", "--tz", "Nowhere/Land"], "unknown time zone"),
    (["--every", "5m", "--tz", "UTC"], "--tz applies to --cron only"),
    (["--every", "367d"], "at most 366d"),
    (["--every", "3000000d"], "at most 366d"),  # past datetime's year 9999
    (["--every", "99999999999999999999s"], "at most 366d"),  # past time_t
    (["--every", "forever"], "at least 1s"),
    (["--every", "5m", "--overlap", "sometimes"], "'sometimes' is not one of"),
])
def test_bad_schedule_options_exit_2_and_store_nothing(run_cli, db, args, fragment):
    run_cli("status")  # the database exists, empty
    before = snapshot(db)
    assert_error(run_cli("schedule", "add", "x", *args, '{"command":"true"}'), 2, fragment)
    assert snapshot(db) == before


@pytest.mark.parametrize("name,template,fragment", [
    ("x", '{"command":', "malformed JSON"),
    ("x", '["true"]', "must be a JSON object"),
    ("x", '{"queue":"q"}', "missing field: command"),
    ("x", '{"command":"true","id":"a"}', "cannot give id"),
    ("x", '{"command":"true","after":"a"}', "cannot give after: a run cannot wait for other jobs"),
    ("x", '{"command":null}', "missing field: command"),
    ("x", '{"command":"true","delay":5}', "cannot give delay"),
    ("x", '{"command":"true","retries":5}', "unknown field(s) retries"),
    ("x", '{"command":"true","timeout":0}', "timeout must be"),
    ("x", '{"command":"true","queue":"bad queue"}', "queue names"),
    ("bad name", '{"command":"true"}', "schedule names"),
    ("x@y", '{"command":"true"}', "schedule names"),
])
def test_bad_templates_and_names_exit_2_and_store_nothing(run_cli, db, name, template, fragment):
    run_cli("status")
    before = snapshot(db)
    assert_error(run_cli("schedule", "add", name, "--every", "1m", template), 2, fragment)
    assert snapshot(db) == before


def test_durations_that_must_be_finite_do_not_offer_forever(run_cli):
    r = run_cli("schedule", "add", "x", "--every", "-5s", '{"command":"true"}')
    assert_error(r, 2, "such as 90s, 12h or 7d, got '-5s'")
    assert "forever" not in r.stderr


def test_null_fields_of_a_template_are_absent_as_in_enqueue(run_cli):
    r = run_cli("schedule", "add", "x", "--every", "1m", '{"command":"true","id":null,"after":null,"queue":null}')
    assert r.exit_code == 0, r.stderr
    assert run_cli.json("schedule", "list")[0]["template"] == {"command": "true"}


def test_replace_keeps_the_schedules_zone_unless_tz_is_given(run_cli):
    run_cli("schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", '{"command":"a"}')
    r = run_cli("schedule", "add", "nightly", "--replace", "--cron", "45 2 * * *", '{"command":"b"}',
                env={"TZ": "Asia/Tokyo"})
    assert r.exit_code == 0 and r.stdout.startswith("nightly: 45 2 * * * (Europe/Berlin); next run "), r.stdout
    r = run_cli("schedule", "add", "nightly", "--replace", "--cron", "45 2 * * *", "--tz", "UTC", '{"command":"b"}')
    assert r.exit_code == 0 and "(UTC)" in r.stdout
    assert run_cli.json("schedule", "list")[0]["zone"] == "UTC"


def test_a_tz_variable_that_names_no_zone_is_said_on_stderr(run_cli):
    r = run_cli("schedule", "add", "x", "--cron", "@daily", '{"command":"true"}', env={"TZ": "CET-1"})
    assert r.exit_code == 0, r.stderr
    zone = run_cli.json("schedule", "list")[0]["zone"]
    assert r.stderr == f"queuectl: warning: $TZ (CET-1) names no time zone; the schedule takes {zone} (give --tz)\n"
    r = run_cli("schedule", "add", "y", "--cron", "@daily", '{"command":"true"}', env={"TZ": "Asia/Tokyo"})
    assert (r.exit_code, r.stderr) == (0, "") and "(Asia/Tokyo)" in r.stdout


def test_a_key_with_overlap_allow_is_refused(run_cli):
    assert_error(run_cli("schedule", "add", "x", "--every", "1m", "--overlap", "allow",
                         '{"command":"true","key":"k"}'), 2, "cannot have --overlap allow")
