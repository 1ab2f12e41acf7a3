"""Validate job specifications given to `queuectl enqueue` (JSON objects) into new-job records."""

import json
import math
import os
import re
import sys
from datetime import datetime, timezone
from typing import NamedTuple

from queuectl.domain.errors import InvalidInput

#: The queue of a job that names none.
DEFAULT_QUEUE = "default"

#: The longest command in bytes (UTF-8): it is passed to /bin/sh as one argument, and Linux refuses
#: an argument of MAX_ARG_STRLEN (32 pages, 128 KiB) or more with E2BIG, counting its NUL
#: (execve(2), "Limits on size of arguments and environment").
MAX_COMMAND_BYTES = 128 * 1024 - 1
MAX_RETRIES = 2**31 - 1
FIELDS = ("id", "command", "queue", "priority", "max_retries", "run_at", "delay", "timeout", "cwd", "key", "after")
#: The most dependencies one job may name.
MAX_AFTER = 1000
_ID = re.compile(r"[A-Za-z0-9._:@+=-]{1,128}")
#: What a job id and an idempotency key may be (_ID), as errors say it.
ID_RULE = "1-128 characters of letters, digits and ._:@+=-"
_QUEUE = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: An unknown field's name shown as it is in a message; any other is shown as repr() shows it.
_PLAIN_NAME = re.compile(r"[\w.-]+")


class NewJob(NamedTuple):
    """A validated job ready to insert. `run_at` is Unix seconds, `timeout` seconds or None.

    `delay` is the relative wait (seconds) that set run_at: the job's `delay`, or 0 when it
    gave no time; None when run_at was given as an absolute time, which stays absolute. A
    relative job's run_at is the parse's estimate (it checks the time falls in years 1-9999):
    the store sets it again from its own clock when it inserts the job (Store.enqueue).
    """

    id: str
    command: str
    queue: str
    priority: int
    max_retries: int | None
    run_at: float
    timeout: float | None
    cwd: str | None
    delay: float | None = 0.0
    key: str | None = None  # idempotency key: nothing is added while a job holding it has not ended
    after: tuple[str, ...] = ()  # ids of jobs that must complete first (each once, in the order given)


def new_job_id() -> str:
    """Return a fresh random job id (16 hex digits, from os.urandom)."""
    return os.urandom(8).hex()


#: The largest integer the stores hold (SQLite's INTEGER, PostgreSQL's bigint): 2**63 - 1.
STORED_INT_MOST = 2**63 - 1


def check_whole(value, what: str, low: int = 0, high: int = STORED_INT_MOST) -> int:
    """Return `value` if it is a whole number (an int, not a bool) from `low` to `high` (by default the most a
    store holds); raises InvalidInput naming `what`."""
    if not _is_int(value) or not low <= value <= high:
        raise InvalidInput(f"{what} must be a whole number from {low} to {high}, not {value!r}")
    return value


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_unicode(text: str) -> bool:
    """Return False if `text` holds lone surrogates, which cannot be stored as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_number(v) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def parse_job(text: str, now: float) -> NewJob:
    """Parse one JSON object (text) into a NewJob; `now` is Unix seconds for `delay`.

    Raises InvalidInput with one line naming the problem (malformed JSON with its position,
    nesting too deep or an integer too long for Python to read, a missing or empty command, an
    unknown field, a value of the wrong type or range). A message never holds a line break.
    """
    return validate_job(_decode(text), now)


def command_of_argv(argv) -> str:
    """Return the command that runs exactly the arguments of `argv` (a sequence of str) under /bin/sh: each
    quoted by shlex.join, so no word is expanded, split or read as shell syntax (`$`, `;`, quotes, newlines,
    globs stay as they are). A first word that starts with a dash is quoted too, since /bin/sh would take a
    command that starts with one for its own option. Raises InvalidInput for an empty argv.
    """
    import shlex

    if not argv:
        raise InvalidInput("give the command after --: queuectl enqueue [OPTIONS] -- COMMAND [ARG]...")
    first = argv[0]
    command = shlex.join(argv)
    if first.startswith("-") and shlex.quote(first) == first:  # quoted: "'-x' ...", which sh reads as the word -x
        command = f"'{first}'{command[len(first):]}"
    return command


def parse_argv(argv, fields: dict, now: float) -> NewJob:
    """Validate a job given as an argv (run without a shell's reading: command_of_argv) and its other fields
    (`fields`: the JSON form's names and types, None for absent) into a NewJob; raises InvalidInput as
    parse_job does."""
    return validate_job({**fields, "command": command_of_argv(argv)}, now)


def _decode(text: str):
    """The JSON value of `text`; raises InvalidInput as parse_job says."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        where = f"column {e.colno}" if e.lineno == 1 else f"line {e.lineno} column {e.colno}"
        msg = e.msg.removesuffix(" at")  # "Invalid control character at" would read "at at"
        raise InvalidInput(f"malformed JSON: {msg} at {where}") from None
    except RecursionError:
        raise InvalidInput("malformed JSON: nested too deeply") from None
    except ValueError:  # int(): Python reads at most sys.get_int_max_str_digits() digits
        raise InvalidInput(f"malformed JSON: a number of more than {sys.get_int_max_str_digits()} digits") from None


#: The job fields a schedule's template may give: the others are each run's own (its id names the
#: schedule and the slot; it runs when its slot comes; it depends on nothing).
TEMPLATE_FIELDS = ("command", "queue", "priority", "max_retries", "timeout", "cwd", "key")


#: The fields that are each run's own, and why a template cannot give them.
_RUNS_OWN = {"id": "each run's id is NAME@SLOT", "run_at": "each run is due at its slot",
             "delay": "each run is due at its slot", "after": "a run cannot wait for other jobs"}


def parse_template(text: str, overlap_allowed: bool) -> dict:
    """Parse a schedule's job template (a JSON object of TEMPLATE_FIELDS); return its fields, nulls left out.

    Raises InvalidInput with one line naming the problem: what parse_job refuses, a field that
    is each run's own (id, run_at, delay, after), or a `key` when runs may overlap (a key
    keeps a run from starting while another holds it: the two contradict each other).
    """
    obj = _decode(text)
    if not isinstance(obj, dict):
        raise InvalidInput(f"a job template must be a JSON object, got {type(obj).__name__ if obj is not None else 'null'}")
    own = [k for k in _RUNS_OWN if obj.get(k) is not None]  # null: the field is absent, as in enqueue
    if own:
        why = dict.fromkeys(_RUNS_OWN[k] for k in own)
        raise InvalidInput(f"a schedule's template cannot give {', '.join(own)}: {'; '.join(why)}")
    unknown = sorted(set(obj) - set(TEMPLATE_FIELDS) - set(_RUNS_OWN))
    if unknown:
        shown = ", ".join(k if _PLAIN_NAME.fullmatch(k) else repr(k) for k in unknown)
        raise InvalidInput(f"unknown field(s) {shown}; a template may give: {', '.join(TEMPLATE_FIELDS)}")
    if obj.get("key") is not None and overlap_allowed:
        raise InvalidInput("a template with a key cannot have --overlap allow: a key keeps a run from starting"
                           " while another run holds it")
    obj = {k: v for k, v in obj.items() if v is not None and k not in _RUNS_OWN}
    validate_job({**obj, "id": "template"}, 0.0)
    return obj


def _no_duplicate_keys(pairs: list) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise InvalidInput(f"field {key!r} is given twice")
        seen[key] = value
    return seen


def check_queue(name) -> str:
    """Return `name` if it is a valid queue name; raises InvalidInput."""
    if not isinstance(name, str) or not _QUEUE.fullmatch(name):
        raise InvalidInput(f"queue names are 1-64 characters of letters, digits and ._-, got {name!r}")
    return name


def check_id(value, what: str) -> str:
    """Return `value` if it is a valid job id or idempotency key (ID_RULE); raises InvalidInput naming it `what`."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidInput(f"{what} must be {ID_RULE}")
    return value


def validate_job(obj, now: float) -> NewJob:
    """Validate a decoded JSON value into a NewJob; raises InvalidInput (see parse_job)."""
    if not isinstance(obj, dict):
        raise InvalidInput(f"a job must be a JSON object, got {type(obj).__name__ if obj is not None else 'null'}")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        shown = ", ".join(k if _PLAIN_NAME.fullmatch(k) else repr(k) for k in unknown)  # repr: one line, no surrogate
        raise InvalidInput(f"unknown field(s) {shown}; allowed: {', '.join(FIELDS)}")
    obj = {k: v for k, v in obj.items() if v is not None or k == "command"}  # null means absent

    command = obj.get("command")
    if "command" not in obj:
        raise InvalidInput("missing field: command")
    if not isinstance(command, str):
        raise InvalidInput("command must be a string")
    if not command.strip():
        raise InvalidInput("command must not be empty")
    if "\0" in command:
        raise InvalidInput("command must not contain a NUL character")
    if not is_unicode(command):
        raise InvalidInput("command must be valid Unicode text (it has a lone surrogate such as \\ud800)")
    if len(command.encode("utf-8")) > MAX_COMMAND_BYTES:
        raise InvalidInput(f"command is longer than {MAX_COMMAND_BYTES} bytes")

    job_id = obj.get("id")
    if job_id is None:
        job_id = new_job_id()
    else:
        check_id(job_id, "id")

    key = obj.get("key")
    if key is not None:
        check_id(key, "key")

    after = _parse_after(obj.get("after", ()), job_id)

    queue = check_queue(obj.get("queue", DEFAULT_QUEUE))

    priority = obj.get("priority", 0)
    if not _is_int(priority):
        raise InvalidInput("priority must be a whole number (higher runs first)")
    if abs(priority) > STORED_INT_MOST:
        raise InvalidInput(f"priority is out of range (-{STORED_INT_MOST} to {STORED_INT_MOST})")

    max_retries = obj.get("max_retries")
    if max_retries is not None and (not _is_int(max_retries) or not 0 <= max_retries <= MAX_RETRIES):
        raise InvalidInput(f"max_retries must be a whole number from 0 to {MAX_RETRIES}")

    if "run_at" in obj and "delay" in obj:
        raise InvalidInput("give run_at or delay, not both")
    run_at, delay = now, 0.0
    if obj.get("run_at") is not None:
        run_at, delay = _parse_run_at(obj["run_at"]), None
    if obj.get("delay") is not None:
        delay = obj["delay"]
        if not _is_number(delay) or delay < 0:
            raise InvalidInput("delay must be a number of seconds >= 0")
        run_at = now + delay
    try:  # every reader prints run_at as a date: refuse one that has none (year outside 1-9999)
        datetime.fromtimestamp(run_at, timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput("run_at or delay is out of range (the time must fall in years 1-9999)") from None

    timeout = obj.get("timeout")
    if timeout is not None and (not _is_number(timeout) or timeout <= 0):
        raise InvalidInput("timeout must be a number of seconds > 0")

    cwd = obj.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/") or "\0" in cwd
                            or not is_unicode(cwd)):
        raise InvalidInput("cwd must be an absolute path")

    return NewJob(
        id=job_id,
        command=command,
        queue=queue,
        priority=priority,
        max_retries=max_retries,
        run_at=run_at,
        timeout=float(timeout) if timeout is not None else None,
        cwd=cwd,
        delay=float(delay) if delay is not None else None,
        key=key,
        after=after,
    )


def _parse_after(value, job_id: str) -> tuple[str, ...]:
    """The `after` field (a job id, or a list of at most MAX_AFTER) as a tuple of distinct ids; raises InvalidInput."""
    ids = [value] if isinstance(value, str) else value
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) and _ID.fullmatch(i) for i in ids):
        raise InvalidInput(f"after must be a job id or a list of job ids ({ID_RULE})")
    if len(ids) > MAX_AFTER:
        raise InvalidInput(f"after names more than {MAX_AFTER} jobs")
    if job_id in ids:
        raise InvalidInput(f"job {job_id} cannot be after itself")
    return tuple(dict.fromkeys(ids))


def _parse_run_at(value) -> float:
    """Return ISO-8601 text with a UTC offset as Unix seconds; raises InvalidInput."""
    if not isinstance(value, str):
        raise InvalidInput("run_at must be an ISO-8601 string with a UTC offset, e.g. 2026-12-01T09:00:00+00:00")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"run_at is not an ISO-8601 time: {value!r}") from None
    if when.tzinfo is None:
        raise InvalidInput(f"run_at needs a UTC offset (e.g. +00:00 or Z): {value!r}")
    return when.timestamp()
