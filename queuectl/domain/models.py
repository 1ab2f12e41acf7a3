"""The queue's vocabulary: job states and the job and worker records read from the store.

Records are NamedTuples: immutable, and cheap to define, which every command's start-up does
(a frozen dataclass costs about 0.7 ms to define, a NamedTuple 0.15; `queuectl enqueue` is held
to 1.3 times the import of click, sqlite3 and json: docs/benchmarks.md).
"""

import enum
import json
from datetime import datetime, timezone
from typing import NamedTuple

from queuectl.domain.errors import InvalidInput
from queuectl.domain.jobspec import DEFAULT_QUEUE
from queuectl.domain.settings import format_duration


class JobState(str, enum.Enum):
    """Where a job is in its life.

    pending -> processing -> completed
                          -> failed (a retry is scheduled at run_at) -> processing ...
                          -> dead (the dead letter queue)
                          -> cancelled (`queuectl cancel`; also from pending, blocked and failed)
    blocked (waiting for the jobs of its `after` to complete) -> pending
                                                             -> cancelled (a dependency ended dead or cancelled)
    """

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"

    def __str__(self) -> str:
        return self.value

    @property
    def ended(self) -> bool:
        """True for the states a job never leaves by itself: completed, dead, cancelled."""
        return self in (JobState.COMPLETED, JobState.DEAD, JobState.CANCELLED)


def job_state(state: str) -> JobState:
    """Return the job state named `state`; raises InvalidInput naming the states."""
    try:
        return JobState(state)
    except ValueError:
        raise InvalidInput(f"no job state {state!r}; states: {', '.join(s.value for s in JobState)}") from None


def iso(ts: float | None) -> str | None:
    """Format a Unix time (seconds) as ISO-8601 in UTC with its offset, or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")


def printable(text: str) -> str:
    """Return `text` safe to print on a terminal: each character that is not printable (control
    characters such as ESC and newline, format characters such as U+202E, separators other than
    the space) as Python writes it in a string literal (\\x1b, \\n, \\u202e), the rest as it is.

    User data (commands, errors, paths, names) goes through it before a terminal sees it, so no
    escape sequence in it reaches the terminal raw and each value stays on its line.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: The most running jobs a draining line names (the others are counted).
MOST_NAMED = 10
#: Seconds between two lines that say what a drain waits for (waiting_line), in the worker's log and `worker stop`.
DRAIN_SAY_EVERY = 5.0


def waiting_line(running: list[tuple[str, float]]) -> str:
    """Return what a drain waits for: "waiting for 2 running jobs: j-41 (12 s), j-44 (3 s)", from (job id,
    seconds it has run) pairs, longest first, at most MOST_NAMED named ("and 3 more"); ids escaped (printable).
    The worker logs it while it drains (queuectl.worker), and `worker stop` prints it while it waits."""
    ordered = sorted(running, key=lambda pair: -pair[1])
    named = ", ".join(f"{printable(job_id)} ({seconds:.0f} s)" for job_id, seconds in ordered[:MOST_NAMED])
    more = f", and {len(ordered) - MOST_NAMED} more" if len(ordered) > MOST_NAMED else ""
    return f"waiting for {len(ordered)} running job{'' if len(ordered) == 1 else 's'}: {named}{more}"


def one_line(text: str, width: int) -> str:
    """Return `text` with its white space folded, escaped for the terminal (printable), cut to `width`
    characters with '...'."""
    line = printable(" ".join(text.split()))
    return line if len(line) <= width else line[: width - 3] + "..."


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


class Job(NamedTuple):
    """One job as stored. Times are Unix seconds; output fields are raw bytes."""

    id: str
    queue: str
    command: str
    state: JobState
    priority: int
    attempts: int
    max_retries: int | None
    timeout: float | None
    cwd: str | None
    run_at: float
    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None
    worker_id: int | None = None
    pgid: int | None = None
    exit_code: int | None = None
    last_error: str | None = None
    key: str | None = None  # its idempotency key, if it was given one
    after: tuple[str, ...] = ()  # the ids of its dependencies (read by get_job and list_jobs only)
    stdout: bytes | None = None
    stderr: bytes | None = None
    seq: int = 0

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self) if k not in ("stdout", "stderr"))
        return f"Job({shown})"

    @classmethod
    def from_row(cls, row) -> "Job":
        """Build a Job from a sqlite3.Row of the jobs table (missing columns stay default)."""
        keys = row.keys()
        values = {k: row[k] for k in keys if k in cls._fields}
        values["state"] = JobState(values["state"])
        return cls(**values)

    def to_dict(self, output: bool = False) -> dict:
        """Return a JSON-ready dict; times as ISO-8601 UTC; output decoded with U+FFFD for bad bytes."""
        d = {
            "id": self.id,
            "queue": self.queue,
            "command": self.command,
            "state": self.state.value,
            "priority": self.priority,
            "attempts": self.attempts,
            "max_retries": self.max_retries,
            "timeout": self.timeout,
            "cwd": self.cwd,
            "run_at": iso(self.run_at),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "exit_code": self.exit_code,
            "last_error": self.last_error,
            "key": self.key,
            "after": list(self.after),
        }
        if output:
            d["stdout"] = _text(self.stdout)
            d["stderr"] = _text(self.stderr)
        return d


class StoppedWorker(NamedTuple):
    """A worker that ended (its registration gone), as `status` shows it. Times are Unix seconds on the store's
    clock; `ended` says how: drained, forced, burst or lost (queuectl.store.shared_schema.STOPPED_WORKERS)."""

    name: str
    host: str
    pid: int
    unit: str | None
    started_at: float
    stopped_at: float
    ended: str

    def to_dict(self) -> dict:
        """Return a JSON-ready dict, times as ISO-8601 UTC."""
        return {"name": self.name, "host": self.host, "pid": self.pid, "unit": self.unit,
                "started_at": iso(self.started_at), "stopped_at": iso(self.stopped_at), "ended": self.ended}


class WorkerInfo(NamedTuple):
    """One registered worker process. Times are Unix seconds."""

    id: int
    name: str
    host: str
    boot_id: str
    pid: int
    pid_start: int | None
    slots: int
    queues: str
    started_at: float
    heartbeat_at: float
    unit: str | None = None
    draining_since: float | None = None
    heartbeat_mono: float | None = None
    beats: int = 0
    pid_ns: str | None = None
    job_ids: tuple[str, ...] = ()

    @property
    def seen(self) -> tuple[int, float]:
        """What a judge saw of its heartbeats (count, wall time); a recovery re-checks it (SqliteStore.recover).

        The time is in it too: a worker of an older queuectl beats without counting.
        """
        return self.beats, self.heartbeat_at

    @property
    def clock_domain(self) -> str:
        """The boot whose CLOCK_MONOTONIC `heartbeat_mono` reads (the kernel boot id; see queuectl.domain.clock)."""
        return self.boot_id.partition(" ")[0]

    @classmethod
    def from_row(cls, row, job_ids=()) -> "WorkerInfo":
        """Build a WorkerInfo from a sqlite3.Row of the workers table."""
        values = {k: row[k] for k in row.keys() if k in cls._fields}
        return cls(**values, job_ids=tuple(job_ids))

    def to_dict(self, heartbeat_age: float, state: str | None = None) -> dict:
        """Return a JSON-ready dict; `heartbeat_age` is seconds since the last heartbeat (queuectl.host.liveness).

        `state` is the caller's judgement of the worker (see queuectl.host.control.worker_state).
        """
        return {
            "name": self.name,
            "pid": self.pid,
            "host": self.host,
            "slots": self.slots,
            "busy": len(self.job_ids),
            "queues": self.queues.split(",") if self.queues else [],
            "jobs": list(self.job_ids),
            "started_at": iso(self.started_at),
            "heartbeat_age": round(max(0.0, heartbeat_age), 3),
            "unit": self.unit,
            "state": state,
            "draining_since": iso(self.draining_since),
        }


class Schedule(NamedTuple):
    """A recurring job (`queuectl schedule`). Times are Unix seconds on the store's clock.

    `kind` and `expr` make its queuectl.domain.recurrence.Rule (Rule.of: "cron" and an expression in
    `zone`, or "every" and whole seconds); `template` holds the runs' job fields; `overlap` is "skip"
    (a slot whose previous run has not ended adds nothing) or "allow". `last_state` is the state of
    its last run's job (None when there was none, or retention deleted it). Its JSON form needs the
    rule: queuectl.api.schedules.to_dict (this module is every command's, and a rule's arithmetic,
    zoneinfo's, only theirs that read schedules).
    """

    name: str
    kind: str
    expr: str
    zone: str
    template: dict
    overlap: str
    created_at: float
    next_at: float
    paused_at: float | None = None
    last_slot: float | None = None
    last_job: str | None = None
    fired_at: float | None = None
    skipped: int = 0
    last_state: JobState | None = None

    @property
    def queue(self) -> str:
        """The queue its runs are enqueued in (the template's, else the default queue)."""
        return self.template.get("queue") or DEFAULT_QUEUE

    @classmethod
    def from_row(cls, row) -> "Schedule":
        """Build a Schedule from a row of the schedules table (with last_state joined from jobs)."""
        values = {k: row[k] for k in row.keys() if k in cls._fields}
        values["template"] = json.loads(values["template"])
        if values.get("last_state") is not None:
            values["last_state"] = JobState(values["last_state"])
        return cls(**values)


class QueueLimit(NamedTuple):
    """The limits of one queue (`queuectl limit`): at most `concurrency` jobs processing at once, and at
    most `rate_count` claims in any `rate_window` seconds; None where not limited. `processing` is how
    many of its jobs are processing now, when read with it."""

    queue: str
    concurrency: int | None = None
    rate_count: int | None = None
    rate_window: float | None = None
    processing: int = 0

    @property
    def text(self) -> str:
        """The limits as `limit` takes them: "concurrency 2, rate 30/1m", or "-"."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        if self.rate_count is not None:
            parts.append(f"rate {self.rate_count}/{format_duration(self.rate_window)}")
        return ", ".join(parts) or "-"

    def to_dict(self) -> dict:
        """{"queue", "concurrency": N or None, "rate": {"count", "window_seconds"} or None, "processing"}."""
        return {"queue": self.queue, "concurrency": self.concurrency,
                "rate": None if self.rate_count is None else {"count": self.rate_count,
                                                              "window_seconds": self.rate_window},
                "processing": self.processing}
