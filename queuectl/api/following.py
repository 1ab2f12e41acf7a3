"""Following a job's output as it is written: what `queuectl logs --follow` (and `enqueue --follow`) do.

A worker records what a running job has written every worker.OUTPUT_EVERY seconds (only while
it has written something new), appended to the job's stored output, which keeps the last
output-limit bytes of each stream as the final record does. The follower reads the job and
the bytes past those it has printed every POLL seconds, in one statement (SqlStore.read_output),
from this host or any other on PostgreSQL; text appears within OUTPUT_EVERY + POLL seconds of
its writing. When a retry starts another attempt, the follower says so on stderr and follows
that one from its first byte. Bytes that passed out of the kept tail before they were read are
named in a line on stderr, not printed. The reads ride out an outage of the database
(queuectl.api.outage): the attempt followed and the byte positions printed are kept across it, so
nothing is printed twice or left out.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, BinaryIO, Callable, NamedTuple

from queuectl.domain.models import Job
from queuectl.api.outage import Patience
from queuectl.domain.jobspec import check_whole

if TYPE_CHECKING:  # the interface documents the store's type; no command needs it to run
    from queuectl.store.interface import CommandStore

#: Seconds between two reads of the followed job.
POLL = 0.2


def follow(store: CommandStore, job_id: str, out: BinaryIO, err: BinaryIO, note: Callable[[str], None],
           sleep: Callable[[float], None] = time.sleep, patience: Patience | None = None) -> Job:
    """Print job `job_id`'s stdout to `out` and its stderr to `err` until it has ended; return it as it ended.

    Starts with what the job's current attempt has written so far (what the output limit still
    holds); a pending or blocked job is waited for. `note` gets one line for each retry followed
    and for bytes lost. Reads go through `patience` (default: one with `note` and `sleep`), which
    rides out an outage of the database and raises DatabaseUnavailable when it gives up (the
    environment's limit: queuectl.api.outage; InvalidConfig for a bad one). Raises NotFound if there
    is no such job.
    """
    if patience is None:
        patience = Patience(note, sleep=sleep)
    attempt: int | None = None  # the attempt followed (None: none yet)
    positions = (0, 0)  # bytes of that attempt's stdout and stderr printed
    error = None  # why the attempt followed failed, as last read (the claim of the next attempt clears it)
    while True:
        job, stored = patience.read(lambda: store.read_output(job_id, attempt, positions))
        current = job.attempts or None
        if attempt is not None and current is not None and current > attempt:
            why = f" ({error})" if error else ""
            note(f"attempt {attempt} ended{why}; following attempt {current}")
            positions = (0, 0)
        error = job.last_error or error if current == attempt else job.last_error
        attempt = current or attempt
        if stored is not None and attempt is not None and stored.attempt in (attempt, None):
            positions = _print(stored, positions, out, err, note)
        if job.state.ended:
            return job
        sleep(POLL)


def _print(stored, positions: tuple[int, int], out: BinaryIO, err: BinaryIO,
           note: Callable[[str], None]) -> tuple[int, int]:
    """Write the bytes of `stored` past `positions`; return the new positions."""
    data, moved, lost = _past(stored, positions)
    for name, stream, chunk, gone in zip(("stdout", "stderr"), (out, err), data, lost):
        if gone:
            note(f"{gone} bytes of {name} were not kept (output-limit) and are not shown")
        if chunk:
            stream.write(chunk)
            stream.flush()
    return moved


def _past(stored, positions: tuple[int, int]) -> tuple[tuple[bytes, bytes], tuple[int, int], tuple[int, int]]:
    """Return the bytes of each stream of `stored` past `positions`, the positions after them, and the bytes of
    each that passed out of the kept tail (output-limit) before they were read."""
    data, moved, lost = [], [], []
    for chunk, start, position, total in zip((stored.stdout, stored.stderr), (stored.stdout_from, stored.stderr_from),
                                             positions, stored.written):
        if total <= position:
            data.append(b"")
            moved.append(position)
            lost.append(0)
            continue
        lost.append(max(0, start - position))
        data.append(chunk[max(0, position - start):])
        moved.append(total)
    return (data[0], data[1]), (moved[0], moved[1]), (lost[0], lost[1])


class OutputStep(NamedTuple):
    """One read of a followed job's output (`output_since`): the `job`, the `attempt` followed (None: none
    started), whether that attempt is newer than the one asked for (`restarted`: the bytes are then from its
    start), the new bytes of each stream, the `positions` to ask from next, and the bytes of each stream
    that passed out of the kept tail before they were read (`lost`)."""

    job: Job
    attempt: int | None
    restarted: bool
    stdout: bytes
    stderr: bytes
    positions: tuple[int, int]
    lost: tuple[int, int]


def output_since(store: CommandStore, job_id: str, attempt: int | None, positions: tuple[int, int]) -> OutputStep:
    """Read job `job_id`'s output of `attempt` past `positions` (bytes of stdout and stderr already shown): one
    step of a follow for a caller that polls (the dashboard's job page). A newer attempt than `attempt` is
    followed from its first byte, with `restarted` set. Raises NotFound if there is no such job, InvalidInput
    for an attempt below 1 or a position below 0 (or either past what a store holds)."""
    if attempt is not None:
        check_whole(attempt, "attempt", low=1)
    positions = (check_whole(positions[0], "out"), check_whole(positions[1], "err"))
    job, stored = store.read_output(job_id, attempt, positions)
    current = job.attempts or None
    restarted = attempt is not None and current is not None and current > attempt
    if restarted or attempt is None:
        positions = (0, 0)  # the store gave all of an output not of `attempt` (SqlStore.read_output)
    attempt = current or attempt
    if stored is None or stored.attempt not in (attempt, None):
        return OutputStep(job, attempt, restarted, b"", b"", positions, (0, 0))
    data, moved, lost = _past(stored, positions)
    return OutputStep(job, attempt, restarted, data[0], data[1], moved, lost)
