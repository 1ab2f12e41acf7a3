"""Schedule rules: when a recurring job's slots fall (`queuectl schedule`). Pure arithmetic, no store.

A rule is a cron expression (the standard five fields, or @hourly, @daily, @weekly,
@monthly, @yearly, @annually, @midnight), read by croniter in a time zone, or an interval
(`--every 30s`, `5m`, `1h`: a whole number of seconds, at least 1). Slots are instants in
Unix seconds, whole seconds:

- An interval's slots are the multiples of its length since the Unix epoch (UTC), so every
  host computes the same ones and `--every 5m` fires at :00, :05, ... of each hour.
- A cron expression's fields are local wall time in the schedule's zone (IANA name, read
  with zoneinfo). croniter matches the fields on naive wall times; this module maps them to
  instants itself, with these rules for daylight-saving changes:
  - a wall time that does not exist (skipped when clocks go forward) runs as if the change
    had not happened yet (zoneinfo's fold=0): 02:30 on a night that jumps from 02:00 to 03:00
    runs at 03:30 (Debian's cron runs it at 03:00);
  - a wall time that happens twice (clocks go back) runs once, at its first occurrence,
    unless the hour field is a wildcard (`*`, `*/2`): such schedules keep their interval
    through the repeated hour (an hourly job runs 25 times that day), as Debian's cron does.
  Debian 12's croniter (1.3) computes zone-aware times wrongly across these changes, which
  is why the mapping is done here, on naive times.
- croniter reads the expression (`croniter.expand`: the fields' sets, alike in Debian 12's 1.3,
  Debian 13's 2.0 and PyPI's 7); the walk from one wall time to the next is done here, a day at
  a time. croniter's own walk before 6.x skips slots when a day-of-month set holds a day the
  month lacks: `* * */10 * *` after 21 February goes to 11 March, not 1 March (pallets-eco/
  croniter#178). The day rules are croniter's: when day-of-month and day-of-week are both
  restricted (neither `*`), a day matching either runs (`0 0 */10 * mon`: the 1st, 11th, 21st,
  31st and every Monday); `L` in day-of-month is the month's last day, `5#2` the second Friday,
  `L5` the last Friday (these two with day-of-month `*` only).
"""

from __future__ import annotations

import os
import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from queuectl.domain.errors import InvalidInput
from queuectl.domain.settings import format_duration, parse_duration

#: The cron aliases accepted (croniter reads each; @reboot has no slots).
ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
#: How far daylight-saving changes move wall time against UTC, at most (2 h: the double summer time of
#: the 1940s; 1 h today). Candidates are looked for this far before and after a wall time.
MAX_SHIFT = timedelta(hours=2)
#: How far a cron walk looks for a matching day (days): the Gregorian calendar's cycle of 400 years, after
#: which dates and weekdays repeat. The sparsest expressions that match are decades apart (a fifth Sunday
#: in February: 2004, 2032, 2060, 2088, 2128); one with no day within never matches (31 February).
MAX_DAYS = 146_097
#: The longest --every (seconds): a year and a day; longer periods are cron's (@yearly). Bounds the slots
#: to dates that datetime and the platform's time_t hold.
MAX_EVERY = 366 * 86400
#: Names: as queue names (letters, digits, ._-), so that `NAME@TIME` is a valid job id.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_name(name) -> str:
    """Return `name` if it is a valid schedule name; raises InvalidInput."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput(f"schedule names are 1-64 characters of letters, digits and ._-, got {name!r}")
    return name


LOCALTIME = "/etc/localtime"  # a link to .../zoneinfo/NAME (systemd's timedatectl, Debian's tzdata)
TIMEZONE_FILE = "/etc/timezone"  # NAME on a line (older Debian)


def local_zone() -> str:
    """The IANA name of this host's time zone: $TZ if it names one, else LOCALTIME's target
    (.../zoneinfo/Europe/Berlin), else TIMEZONE_FILE's (Debian), else "UTC"."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath(LOCALTIME)
        if "/zoneinfo/" in target:
            candidates.append(target.split("/zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        with open(TIMEZONE_FILE, encoding="utf-8") as f:
            candidates.append(f.read().strip())
    except OSError:
        pass
    for name in candidates:
        if name and _zone_or_none(name) is not None:
            return name
    return "UTC"


def _zone_or_none(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def check_zone(name: str) -> ZoneInfo:
    """Return the zone called `name` (an IANA name such as Europe/Berlin, or UTC); raises InvalidInput."""
    zone = _zone_or_none(name) if isinstance(name, str) and name and not name.startswith("/") else None
    if zone is None:
        raise InvalidInput(f"unknown time zone {name!r}: give an IANA name such as Europe/Berlin or UTC"
                           " (timedatectl list-timezones lists them)")
    return zone


@dataclass(frozen=True)
class Rule:
    """When a schedule's slots fall: `kind` "cron" (`expr` a cron expression, in `zone`) or "every"
    (`expr` the interval in whole seconds, as text). `text` is the rule as a user gives it."""

    kind: str
    expr: str
    zone: str

    @classmethod
    def of(cls, schedule) -> Rule:
        """The rule of a stored schedule (queuectl.domain.models.Schedule: its kind, expression and zone)."""
        return cls(schedule.kind, schedule.expr, schedule.zone)

    @property
    def text(self) -> str:
        if self.kind == "every":
            return f"every {format_duration(float(self.expr))}"
        return self.expr

    def next_after(self, t: float) -> float:
        """The first slot later than `t` (Unix seconds); raises InvalidInput if there is none."""
        if self.kind == "every":
            period = int(self.expr)
            return float((int(t // period) + 1) * period)
        return _nearest_cron(self.expr, ZoneInfo(self.zone), t, forward=True)

    def last_until(self, t: float) -> float:
        """The last slot at or before `t` (Unix seconds); raises InvalidInput if there is none."""
        if self.kind == "every":
            period = int(self.expr)
            return float(int(t // period) * period)
        return _nearest_cron(self.expr, ZoneInfo(self.zone), t, forward=False)

    def local(self, t: float) -> str:
        """Instant `t` as ISO 8601 wall time with its offset, in the schedule's zone."""
        return datetime.fromtimestamp(t, ZoneInfo(self.zone)).isoformat()


def parse_rule(cron: str | None, every: str | None, zone: str | None) -> Rule:
    """The rule of `--cron EXPR` or `--every DURATION` in `zone` (None: this host's, local_zone).

    Raises InvalidInput naming the problem: both or neither given, a cron expression croniter
    refuses or that never matches (30 February), an interval that is not a whole number of
    seconds from 1 to MAX_EVERY, an unknown zone.
    """
    from croniter import croniter

    if (cron is None) == (every is None):
        raise InvalidInput("give --cron EXPR or --every DURATION (one of them)")
    zone = local_zone() if zone is None else zone
    check_zone(zone)
    if every is not None:
        seconds = parse_duration(every, "--every", forever=False)
        if seconds is None or seconds < 1 or not float(seconds).is_integer():
            raise InvalidInput(f"--every must be a whole number of seconds of at least 1s (such as 30s, 5m or 1h),"
                               f" got {every!r}")
        if seconds > MAX_EVERY:
            raise InvalidInput(f"--every is at most 366d, got {every!r}; for longer periods give --cron (@yearly)")
        return Rule("every", str(int(seconds)), zone)
    expr = " ".join(cron.split())
    if expr.startswith("@"):
        if expr.lower() not in ALIASES:
            raise InvalidInput(f"unknown cron alias {expr!r}; known: {', '.join(ALIASES)}")
        expr = expr.lower()
    elif len(expr.split()) != 5:
        raise InvalidInput(f"a cron expression has five fields (minute hour day-of-month month day-of-week),"
                           f" got {cron!r}")
    try:
        croniter(expr, datetime(2000, 1, 1))
    except (ValueError, KeyError) as e:  # croniter's errors are ValueErrors
        raise InvalidInput(f"not a valid cron expression {cron!r}: {_bad_field(expr) or e}") from None
    rule = Rule("cron", expr, zone)
    rule.next_after(datetime.now(timezone.utc).timestamp())  # one that never matches (30 February) fails here
    return rule


#: The five fields, in order, and the values each takes (crontab(5)).
FIELDS = (("minute", "0-59"), ("hour", "0-23"), ("day of month", "1-31 or L"), ("month", "1-12 or jan-dec"),
          ("day of week", "0-7 or sun-sat, N#K (K 1-5), LN"))


def _bad_field(expr: str) -> str | None:
    """Which field of five-field `expr` croniter refuses, as a phrase ("the hour field '25' is not 0-23"): each
    field is tried alone, the others `*`; None if each passes alone."""
    from croniter import croniter

    fields = expr.split()
    for i, (name, values) in enumerate(FIELDS):
        probe = ["*"] * 5
        probe[i] = fields[i]
        try:
            croniter(" ".join(probe), datetime(2000, 1, 1))
        except (ValueError, KeyError):
            return f"the {name} field {fields[i]!r} is not {values} (lists, ranges and steps of them)"
    return None


def _hour_is_wildcard(expr: str) -> bool:
    return expr.startswith("@hourly") or (not expr.startswith("@") and expr.split()[1].startswith("*"))


def _instants(wall: datetime, zone: ZoneInfo, twice: bool) -> list[float]:
    """The instants of naive wall time `wall` in `zone`, by the module's rules."""
    first = wall.replace(tzinfo=zone, fold=0).timestamp()
    second = wall.replace(tzinfo=zone, fold=1).timestamp()
    return [first, second] if second > first and twice else [first]  # second > first: a repeated wall time


@dataclass(frozen=True)
class _Fields:
    """A cron expression's expanded fields (croniter.expand): the times of a day they give, and the day fields
    as sets (None for `*`)."""

    times: tuple[time, ...]  # of a day, in order (the hours by the minutes)
    days: frozenset | None  # days of the month, and "l" (the last)
    months: frozenset | None
    weekdays: frozenset | None  # 0 = Sunday
    nth: dict  # weekday -> {1..5, "l"}: only those occurrences in the month (5#2, L5)

    @classmethod
    @lru_cache(maxsize=256)
    def of(cls, expr: str) -> "_Fields":
        from croniter import croniter

        (minutes, hours, days, months, weekdays), nth = croniter.expand(expr)
        if nth and days != ["*"]:  # croniter finds no date for these (1.3 to 7)
            raise InvalidInput(f"the cron expression {expr!r} gives both a day of the month and a weekday's"
                               " occurrence in it (5#2, L5): give one of them, the other as *")

        def chosen(values):
            return None if values == ["*"] else frozenset(values)

        def every(values, count):
            return range(count) if values == ["*"] else sorted(values)

        times = tuple(time(h, m) for h in every(hours, 24) for m in every(minutes, 60))
        return cls(times, chosen(days), chosen(months), chosen(weekdays), {k: set(v) for k, v in nth.items()})

    def runs_on(self, day: date) -> bool:
        """Whether `day` is one of the expression's days, by croniter's rules (the module's docstring)."""
        if self.months is not None and day.month not in self.months:
            return False
        last = monthrange(day.year, day.month)[1]
        by_day = self.days is not None and (day.day in self.days or ("l" in self.days and day.day == last))
        weekday = day.isoweekday() % 7
        occurrences = self.nth.get(weekday)
        by_weekday = self.weekdays is not None and weekday in self.weekdays and (
            not occurrences or (day.day - 1) // 7 + 1 in occurrences or ("l" in occurrences and day.day + 7 > last))
        if self.days is not None and self.weekdays is not None:
            return by_day or by_weekday
        return (self.days is None or by_day) and (self.weekdays is None or by_weekday)

    def walls(self, start: datetime, forward: bool):
        """The wall times matching the fields, from `start` (naive, included) forward or backward, in order,
        for MAX_DAYS days."""
        times = self.times if forward else self.times[::-1]
        day, one = start.date(), timedelta(days=1 if forward else -1)
        for _ in range(MAX_DAYS):
            if self.runs_on(day):
                for at in times:
                    wall = datetime.combine(day, at)
                    if wall >= start if forward else wall <= start:
                        yield wall
            day += one


def _nearest_cron(expr: str, zone: ZoneInfo, t: float, forward: bool) -> float:
    """The first instant later than `t` (forward) or the last at or before it whose wall time in `zone`
    matches `expr`, by the module's rules. Walks naive wall times from MAX_SHIFT before (after) `t`'s wall
    time, until a wall time 2 x MAX_SHIFT past the best instant's, which no later (earlier) wall time can
    beat. Raises InvalidInput if no day within MAX_DAYS matches."""
    twice = _hour_is_wildcard(expr)
    wall_t = datetime.fromtimestamp(t, zone).replace(tzinfo=None)
    best, best_wall = None, None
    try:
        for wall in _Fields.of(expr).walls(wall_t - MAX_SHIFT if forward else wall_t + MAX_SHIFT, forward):
            if best_wall is not None and abs(wall - best_wall) > 2 * MAX_SHIFT:
                return best
            for at in _instants(wall, zone, twice):
                if (at > t if forward else at <= t) and (best is None or (at < best if forward else at > best)):
                    best, best_wall = at, wall
    except OverflowError:  # past year 9999 or before year 1
        pass
    if best is not None:
        return best
    raise InvalidInput(f"the cron expression {expr!r} never matches a date")


def slot_id(name: str, slot: float) -> str:
    """The job id of schedule `name`'s run for `slot`: NAME@YYYY-MM-DDTHH:MM:SSZ (UTC)."""
    return f"{name}@{datetime.fromtimestamp(slot, timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}"
