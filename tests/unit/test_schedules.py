"""Schedules (`queuectl schedule`), on SQLite and PostgreSQL: the cron arithmetic across daylight-saving changes
(a library test), the commands, and every bad input is one line, exit 2, nothing stored. How the store fires
them: tests/unit/conformance/test_schedules.py."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from support.cli import assert_error
from support.engines import snapshot
from queuectl.domain.errors import InvalidInput
from queuectl.domain.recurrence import local_zone, parse_rule, slot_id
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


BERLIN = ZoneInfo("Europe/Berlin")
#: 2026-12-02T10:00:00Z, a whole hour: the tests' store clock starts here.
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=ZoneInfo("UTC")).timestamp()


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


def utc(*args):
    return datetime(*args, tzinfo=ZoneInfo("UTC")).timestamp()


@pytest.mark.parametrize("expr, after, expected", [
    ("* * */10 * *", utc(2020, 2, 21, 23, 59), utc(2020, 3, 1)),  # 31 February does not exist: 1 March
    ("0 0 */10 * *", utc(2021, 2, 21, 12), utc(2021, 3, 1)),
    ("0 0 30,31 * *", utc(2021, 1, 31), utc(2021, 3, 30)),  # February has neither
    ("0 0 29 2 *", utc(2096, 3, 1), utc(2104, 2, 29)),  # 2100 is no leap year
    ("0 0 L * *", utc(2024, 2, 1), utc(2024, 2, 29)),
    ("0 0 L * *", utc(2023, 2, 1), utc(2023, 2, 28)),
    ("0 9 * * 5#2", utc(2026, 12, 1), utc(2026, 12, 11, 9)),  # the second Friday
    ("0 9 * * L5", utc(2026, 12, 1), utc(2026, 12, 25, 9)),  # the last Friday
    ("0 0 */10 * mon", utc(2026, 12, 5), utc(2026, 12, 7)),  # both restricted: either (Monday the 7th)
    ("0 0 */10 * mon", utc(2026, 12, 8), utc(2026, 12, 11)),
    ("0 0 * 2 mon", utc(2026, 1, 5), utc(2026, 2, 2)),  # one restricted: both (a Monday in February)
])
def test_the_next_slot_skips_no_day_the_month_lacks(expr, after, expected):
    """Known answers on every croniter (Debian 12's 1.3 and 13's 2.0 skip 1 March in the first two cases),
    and last_until finds each slot back from the instant before the next."""
    rule = parse_rule(expr, None, "UTC")
    assert rule.next_after(after) == expected
    assert rule.last_until(expected) == expected and rule.last_until(expected - 1) <= after


def _croniter_walks_right():
    from importlib.metadata import version
    return int(version("croniter").split(".")[0]) >= 7


ORACLE_FIELDS = (["0", "*/20", "5-10"], ["0", "*/6", "23"],
                 ["*", "1", "*/10", "29-31", "31", "L", "15,L", "*/3"],
                 ["*", "2", "*/2", "1-3"], ["*", "0", "1-5", "5#2", "L5", "sat"])


@pytest.mark.skipif(not _croniter_walks_right(), reason="this croniter's own walk skips slots (croniter#178)")
@settings(max_examples=300, deadline=None)
@given(st.tuples(*(st.sampled_from(f) for f in ORACLE_FIELDS)),
       st.integers(min_value=1_577_836_800, max_value=1_893_456_000))
def test_slots_in_utc_are_croniters_where_its_walk_is_right(fields, t):
    """Against croniter's own walk (PyPI's 7, which skips no day): in UTC, where wall time is the instant,
    the next slot and the last are croniter's."""
    from croniter import croniter
    assume(fields[2] == "*" or not any(c in fields[4] for c in "#L"))  # refused (test_bad_rules_are_refused)
    from croniter import CroniterBadDateError
    expr = " ".join(fields)
    start = datetime.fromtimestamp(t, ZoneInfo("UTC")).replace(tzinfo=None)
    try:
        rule = parse_rule(expr, None, "UTC")
    except InvalidInput as e:  # 31 February: croniter finds no date either
        assert "never matches" in str(e)
        with pytest.raises(CroniterBadDateError):
            croniter(expr, start).get_next(datetime)
        return
    expected_next = croniter(expr, start).get_next(datetime).replace(tzinfo=ZoneInfo("UTC")).timestamp()
    expected_last = croniter(expr, start + timedelta(seconds=1)).get_prev(datetime).replace(
        tzinfo=ZoneInfo("UTC")).timestamp()
    assert (rule.next_after(t), rule.last_until(t)) == (expected_next, expected_last)


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
    from queuectl.domain import recurrence
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
    ("61 * * * *", None, "UTC", "not a valid cron expression '61 * * * *': the minute field '61' is not 0-59"),
    ("0 25 * * *", None, "UTC", "the hour field '25' is not 0-23"),
    ("0 0 * foo *", None, "UTC", "the month field 'foo' is not 1-12 or jan-dec"),
    ("0 0 * * 5#6", None, "UTC", "the day of week field '5#6' is not 0-7 or sun-sat, N#K (K 1-5), LN"),
    ("* * *", None, "UTC", "five fields"),
    ("* * * * * *", None, "UTC", "five fields"),
    ("@reboot", None, "UTC", "unknown cron alias"),
    ("0 0 30 2 *", None, "UTC", "never matches"),
    ("0 0 31 4,6,9,11 *", None, "UTC", "never matches"),
    ("0 0 1 * 5#2", None, "UTC", "give one of them"),
    ("0 0 L * L5", None, "UTC", "give one of them"),
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
    with pytest.raises(InvalidInput, match=re.escape(fragment)):
        parse_rule(cron, every, zone)


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
    assert "paused" in table.splitlines()[1].split()  # its next run, as status and the dashboard say it
    r = run_cli("schedule", "resume", "nightly", "ghost")
    assert (r.exit_code, r.stdout) == (1, "nightly: resumed\n") and "no schedule named ghost" in r.stderr
    r = run_cli("schedule", "rm", "nightly")
    assert (r.exit_code, r.stdout) == (0, "nightly: removed\n")
    assert run_cli.json("schedule", "list") == []
    assert_error(run_cli("schedule", "rm", "nightly"), 1, "no schedule named nightly")


def test_remove_delete_and_ls_are_rm_and_list_but_not_in_the_help(run_cli):
    for alias in ("remove", "delete"):
        assert run_cli("schedule", "add", "tick", "--every", "1m", '{"command":"x"}').exit_code == 0
        assert run_cli.json("schedule", "ls")[0]["name"] == "tick"
        r = run_cli("schedule", alias, "tick")
        assert (r.exit_code, r.stdout) == (0, "tick: removed\n"), r.stderr
    assert_error(run_cli("schedule", "remove", "tick"), 1, "no schedule named tick")
    assert_error(run_cli("schedule", "erase", "tick"), 2, "No such command 'erase'")
    commands = run_cli("schedule", "--help").stdout.split("Commands:")[1]
    assert " rm " in commands and not any(f" {alias} " in commands for alias in ("remove", "delete", "ls"))


@pytest.mark.parametrize("args,fragment", [
    (["--cron", "61 * * * *"], "not a valid cron expression"),
    (["--cron", "* * *"], "five fields"),
    (["--every", "0"], "at least 1s"),
    (["--every", "5m", "--cron", "* * * * *"], "one of them"),
    ([], "one of them"),
    (["--cron", "@daily", "--tz", "Nowhere/Land"], "unknown time zone"),
    (["--cron", "@daily", "--tz", ""], "unknown time zone ''"),
    (["--cron", "0 0 1 * 5#2"], "give one of them"),
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
