"""Output flushing: when a running job's new output is recorded (for `logs --follow`).

A running job's output is recorded with the next exchange once OUTPUT_EVERY seconds have passed
since its last record; a job that ends sooner, as short jobs do, has its output recorded with
its end alone. Times are CLOCK_MONOTONIC seconds.
"""

from __future__ import annotations

from queuectl.store.request import LiveOutput

#: Seconds between records of a running job's new output (for `logs --follow`, which reads it within
#: 1 s): a job that ends sooner, as short jobs do, has its output recorded with its end alone.
OUTPUT_EVERY = 0.25


def output_due(proc) -> float:
    """Return the monotonic time by which a running job's new output is to be recorded (inf: it has none)."""
    return proc.flushed_at + OUTPUT_EVERY if proc.unflushed() else float("inf")


def next_output_due(running: dict) -> float:
    """Return the monotonic time by which running jobs' new output is to be recorded (inf: none has any)."""
    return min((output_due(p) for p in running.values()), default=float("inf"))


def output_to_record(running: dict, mono: float) -> list[LiveOutput]:
    """Return the new output of the running jobs ({job id: RunningJob}) due by monotonic `mono`."""
    return [LiveOutput(*proc.output_since(proc.flushed), *proc.flushed, proc.written, job_id=job_id)
            for job_id, proc in running.items() if output_due(proc) <= mono]


def output_recorded(running: dict, output: list[LiveOutput], mono: float) -> None:
    """Note that `output` was recorded at monotonic `mono`, for the jobs still running."""
    for o in output:
        proc = running.get(o.job_id)
        if proc is not None:
            proc.flushed, proc.flushed_at = o.written, mono
