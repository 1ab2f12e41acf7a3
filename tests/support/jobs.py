"""Jobs enqueued through the library (queuectl.api.jobs), as `queuectl enqueue` would, for tests that hold a
store; what a schedule's job id says (slot_of)."""

from __future__ import annotations

import json
from datetime import datetime

from queuectl.api import jobs


def enqueue_specs(store, *specs: str) -> list[str]:
    """Enqueue one job per JSON spec (the enqueue command's); return their ids."""
    return [e.id for e in jobs.enqueue(store, [jobs.parse_one(s) for s in specs])]


def enqueue_job(store, **job) -> str:
    """Enqueue the job of `job` (the enqueue JSON's fields); return its id."""
    return enqueue_specs(store, json.dumps(job))[0]


def slot_of(job_id: str) -> float:
    """The slot of a schedule's run (seconds since the epoch), from its id (NAME@YYYY-MM-DDTHH:MM:SSZ)."""
    return datetime.strptime(job_id.split("@", 1)[1], "%Y-%m-%dT%H:%M:%S%z").timestamp()
