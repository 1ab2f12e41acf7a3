"""The queue's vocabulary: job states and the job and worker records read from the store."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timezone


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


def iso(ts: float | None) -> str | None:
    """Format a Unix time (seconds) as ISO-8601 in UTC with its offset, or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")


def one_line(text: str, width: int) -> str:
    """Return `text` with its white space folded, cut to `width` characters with '...'."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Job:
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
    stdout: bytes | None = field(default=None, repr=False)
    stderr: bytes | None = field(default=None, repr=False)
    seq: int = 0

    @classmethod
    def from_row(cls, row) -> "Job":
        """Build a Job from a sqlite3.Row of the jobs table (missing columns stay default)."""
        keys = row.keys()
        values = {k: row[k] for k in keys if k in cls.__dataclass_fields__}
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


@dataclass(frozen=True)
class WorkerInfo:
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
        """The boot whose CLOCK_MONOTONIC `heartbeat_mono` reads (the kernel boot id; see queuectl.clock)."""
        return self.boot_id.partition(" ")[0]

    @classmethod
    def from_row(cls, row, job_ids=()) -> "WorkerInfo":
        """Build a WorkerInfo from a sqlite3.Row of the workers table."""
        values = {k: row[k] for k in row.keys() if k in cls.__dataclass_fields__}
        return cls(**values, job_ids=tuple(job_ids))

    def to_dict(self, heartbeat_age: float, state: str | None = None) -> dict:
        """Return a JSON-ready dict; `heartbeat_age` is seconds since the last heartbeat (queuectl.liveness).

        `state` is the caller's judgement of the worker (see queuectl.control.worker_state).
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
