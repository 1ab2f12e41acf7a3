"""Queue settings kept in the database (`queuectl config`): their names, types, defaults and ranges."""

import math
from typing import Any, Callable, NamedTuple

from queuectl.domain.errors import InvalidConfig, InvalidInput
from queuectl.domain.jobspec import MAX_RETRIES


class Setting(NamedTuple):
    """One setting: `parse` turns user text into a typed value or raises InvalidInput."""

    key: str
    default: Any
    help: str
    parse: Callable[[str, Any], Any]


def _number(kind: type, *, minimum: float, maximum: float | None = None, exclusive: bool = False,
            nullable: bool = False):
    """Return a parser for ints or floats >= minimum (> when exclusive), <= maximum; 'none' if nullable."""
    bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
    if maximum is not None:
        most = str(int(maximum)) if float(maximum).is_integer() else f"{maximum:g}"
        bound = f"{bound} and at most {most}" if exclusive else f"from {minimum:g} to {most}"
    noun = "a whole number" if kind is int else "a number"
    expect = f"{noun} {bound}" + (" or 'none'" if nullable else "")

    def parse(key: str, raw: Any):
        if nullable and (raw is None or (isinstance(raw, str) and raw.strip().lower() in ("none", "null", ""))):
            return None
        if isinstance(raw, bool):
            raise InvalidInput(f"{key} must be {expect}, got {raw!r}")
        try:
            value = kind(raw) if not isinstance(raw, str) else kind(raw.strip())
        except (TypeError, ValueError):
            raise InvalidInput(f"{key} must be {expect}, got {raw!r}") from None
        if isinstance(raw, float) and kind is int and raw != int(raw):
            raise InvalidInput(f"{key} must be {expect}, got {raw!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(f"{key} must be {expect}, got {raw!r}")
        if value < minimum or (exclusive and value == minimum) or (maximum is not None and value > maximum):
            raise InvalidInput(f"{key} must be {expect}, got {raw!r}")
        return value

    return parse


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: Any, what: str = "a duration", forever: bool = True) -> float | None:
    """Return seconds for "90s", "15m", "12h", "7d", "2w" or a plain number of seconds; None for "forever".

    Raises InvalidInput naming `what` otherwise (negative, not finite, no such unit); its message
    offers 'forever' only if `forever` (callers that refuse None say False).
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    elif text is None or isinstance(text, str) and text.strip().lower() in ("forever", "none"):
        return None
    elif isinstance(text, str) and text.strip():
        t = text.strip().lower()
        unit = _UNITS.get(t[-1])
        try:
            value = float(t[:-1] if unit else t) * (unit or 1)
        except ValueError:
            value = math.nan
    else:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        offer = " (or 'forever')" if forever else ""
        raise InvalidInput(f"{what} must be a number of seconds or a duration such as 90s, 12h or 7d{offer},"
                           f" got {text!r}")
    return value


#: Upper bounds of settings (seconds, bytes), so that no time they make passes what dates can show and no
#: worker waits beyond reason: a retry delay, a timeout or a stale-after of a year and a day; heartbeats
#: and polls a day apart; retention a century (longer: 'forever'); SQLite's and PostgreSQL's largest
#: value (~1 GB). Generous, so that no value a site set before they were bounded stops its workers.
LONGEST_DELAY = 366 * 86400.0
LONGEST_BEAT = 86400.0
LONGEST_STALE = 366 * 86400.0
LONGEST_KEEP = 36500 * 86400.0
LARGEST_OUTPUT = 1_000_000_000


def _duration(key: str, raw: Any) -> float | None:
    seconds = parse_duration(raw, key)
    if seconds is not None and seconds > LONGEST_KEEP:
        raise InvalidInput(f"{key} is at most 36500d (a century), or 'forever'; got {raw!r}")
    return seconds


def format_duration(seconds: float | None) -> str:
    """Return what parse_duration reads back: 86400 -> "1d", 90 -> "90s", 2.5 -> "2.5s", None -> "forever"."""
    if seconds is None:
        return "forever"
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.15g}{unit}"  # 9999999d, not 1e+07d
    return f"{seconds!r}s" if not float(seconds).is_integer() else f"{seconds:.0f}s"


SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in (
        Setting("max-retries", 3, "retries after the first run, for jobs that do not set max_retries",
                _number(int, minimum=0, maximum=MAX_RETRIES)),
        Setting("backoff-base", 2.0, "a retry waits backoff-base ** attempts seconds", _number(float, minimum=1)),
        Setting("backoff-max", 3600.0, "the longest retry delay, seconds",
                _number(float, minimum=0, maximum=LONGEST_DELAY)),
        Setting("job-timeout", None, "seconds a job may run when it sets no timeout; none = no limit",
                _number(float, minimum=0, maximum=LONGEST_DELAY, exclusive=True, nullable=True)),
        Setting("heartbeat-interval", 5.0, "seconds between a worker's heartbeats",
                _number(float, minimum=0.05, maximum=LONGEST_BEAT)),
        Setting("stale-after", 30.0, "seconds without a heartbeat after which a worker's jobs are recovered",
                _number(float, minimum=0, maximum=LONGEST_STALE, exclusive=True)),
        Setting("poll-interval", 1.0, "seconds an idle worker waits between looks for new jobs",
                _number(float, minimum=0.01, maximum=LONGEST_BEAT)),
        Setting("output-limit", 1048576, "bytes of stdout and of stderr kept per job (the tail)",
                _number(int, minimum=0, maximum=LARGEST_OUTPUT)),
        # Retention (River's defaults: finished and cancelled jobs a day, discarded ones a week).
        Setting("keep-completed", 86400.0, "how long completed jobs are kept (90s, 12h, 7d, forever)", _duration),
        Setting("keep-cancelled", 86400.0, "how long cancelled jobs are kept", _duration),
        Setting("keep-dead", 7 * 86400.0, "how long dead jobs (the DLQ) are kept", _duration),
        Setting("keep-history", 14 * 86400.0, "how long the activity history's minutes are kept (queuectl history)",
                _duration),
    )
}

#: The retention setting of each state that retention deletes.
RETENTION = {"completed": "keep-completed", "cancelled": "keep-cancelled", "dead": "keep-dead"}


def kept_ages(config: dict, states=RETENTION) -> dict[str, float]:
    """Return {state: seconds a finished job of it is kept} for `states` (default: every one retention
    deletes) from the settings `config`, leaving out those kept forever: what retention and purge delete."""
    return {state: config[RETENTION[state]] for state in states if config[RETENTION[state]] is not None}


def canonical_key(key: str) -> str:
    """Return the setting's canonical name (hyphens); raises InvalidInput for an unknown key."""
    name = key.strip().lower().replace("_", "-")
    if name not in SETTINGS:
        raise InvalidInput(f"unknown config key {key!r}; known keys: {', '.join(SETTINGS)}")
    return name


def show_value(key: str, value: Any) -> str:
    """Return setting `key`'s value as text that `config set` reads back to the same value (no rounding)."""
    if SETTINGS[key].parse is _duration:
        return format_duration(value)
    if value is None:
        return "none"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def parse_value(key: str, raw: Any) -> Any:
    """Return `raw` (text or a JSON value) as the typed value of setting `key`; raises InvalidInput."""
    name = canonical_key(key)
    return SETTINGS[name].parse(name, raw)


def check_consistent(values: dict[str, Any]) -> None:
    """Raise InvalidInput unless stale-after exceeds twice heartbeat-interval.

    The rule leaves room for one late heartbeat, so a live but busy worker is never
    taken for dead.
    """
    hb, stale = values["heartbeat-interval"], values["stale-after"]
    if not stale > 2 * hb:
        raise InvalidInput(
            f"stale-after ({stale:g} s) must exceed 2 x heartbeat-interval ({hb:g} s)"
        )


def consistent(values: dict[str, Any]) -> dict[str, Any]:
    """Return `values` (every setting, as the store reads them) if check_consistent holds; raise InvalidConfig
    naming the rule they break (a worker does not start with them, and keeps its settings on a reload)."""
    try:
        check_consistent(values)
    except InvalidInput as e:
        raise InvalidConfig(str(e)) from None
    return values


def defaults() -> dict[str, Any]:
    """Return every setting's default value, by canonical key."""
    return {k: s.default for k, s in SETTINGS.items()}
