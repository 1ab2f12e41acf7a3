"""`queuectl wait` and `logs`, and the waiting and following they share with `enqueue --wait` and `--follow`.

A module of its own: a plain `queuectl enqueue` waits for nothing, and imports none of this. What a wait runs is
imported here, before any wait starts: a Ctrl+C that lands inside an import does not reliably reach the caller
as KeyboardInterrupt (Python wraps it in a RuntimeError when it interrupts a class's creation, such as a
dataclass's), and a wait must be stopped by Ctrl+C cleanly.
"""

from __future__ import annotations

import sys

import click

from queuectl.api import jobs as api
from queuectl.api.following import follow as follow_output
from queuectl.api.waiting import EXIT_TIMEOUT, exit_status, wait as wait_for, wait_enqueued
from queuectl.cli.common import Seconds, json_option, note, outage_doc, pass_app, patience, print_json, quiet_option
from queuectl.domain.errors import InvalidInput
from queuectl.domain.models import JobState, printable


@click.command()
@click.argument("job_id", metavar="ID")
@click.option("--follow", "-f", is_flag=True,
              help="Then print its output as it is written, until the job ends; exit as `wait` does.")
@json_option
@pass_app
@outage_doc
def logs(app, job_id, follow, as_json):
    """Print the output a job's last run captured: its stdout on stdout, its stderr on stderr.

    The bytes are written as the job wrote them (the last output-limit bytes of each).
    With --follow: what the running attempt has written so far, then its output as it
    comes (within a second), across retries (a line on stderr says when another attempt
    starts), until the job has ended; a pending or blocked job is waited for. Exit 0
    when it completed, 1 when it ended dead or cancelled (a line on stderr says why).
    An outage of the database is ridden out (a line on stderr says so) for up to
    OUTAGE_LIMIT, then it exits 1.

    \b
    Examples:
      queuectl logs job1
      queuectl logs -f job1
    """
    if follow:
        if as_json:
            raise InvalidInput("--follow prints the output as it comes; it has no --json")
        waiting = patience()
        return follow_job(app.store(), job_id, waiting, wait_style=True)
    job = api.show(app.store(), job_id, output=True)
    if as_json:
        d = job.to_dict(output=True)
        print_json({k: d[k] for k in ("id", "state", "exit_code", "stdout", "stderr")})
        return
    for stream, data in ((sys.stdout, job.stdout), (sys.stderr, job.stderr)):
        stream.flush()
        stream.buffer.write(data or b"")
        stream.buffer.flush()


@click.command()
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--timeout", type=Seconds(), default=None, metavar="SECONDS",
              help="Give up after this long: seconds, or 90s, 10m, 1h (exit 124, as timeout(1)).")
@json_option
@quiet_option
@pass_app
@outage_doc
def wait(app, job_ids, timeout, as_json, quiet):
    """Wait until every job named has ended: completed, dead or cancelled.

    While it waits, each attempt that fails is one line on stderr ("job ID: attempt 2 of 4
    failed (exit code 3): retry in 4 s", and "...: dead" for the last); --quiet leaves them
    out; stdout holds only the --json answer. Exit 0 when all completed; 1 when any ended dead
    or cancelled (a line each on stderr, with its last error) or an id names no job (nothing is waited for then);
    124 when --timeout passes first; 130 on Ctrl+C. It notices an end within 0.1 s of its record,
    from any host on PostgreSQL. An outage of the database is ridden out (a line on stderr
    says so) for up to OUTAGE_LIMIT or until --timeout, then it exits 1.

    \b
    Examples:
      queuectl wait job1
      queuectl wait build test --timeout 600 && ./deploy
      queuectl wait job1 --json
    """
    job_ids = list(dict.fromkeys(job_ids))  # each once, in the order given
    waiting = patience()
    try:
        return _wait(app.store(), job_ids, waiting, timeout, as_json, _attempt_note(quiet))
    except KeyboardInterrupt:
        return _stopped_waiting(job_ids, "the jobs go on")


def _wait(store, job_ids: list[str], waiting, timeout: float | None, as_json: bool, note) -> int:
    """`wait`'s work (see it), once the store is open, riding out outages with `waiting`, a line per failed
    attempt to `note` (None: none); returns the exit code."""
    waited = wait_for(store, job_ids, waiting, timeout, note)
    for job_id in waited.unknown:
        click.echo(f"queuectl: error: no job with id {job_id!r}", err=True)
    if waited.unknown:
        return 1
    if as_json:
        print_json([{"id": j.id, "state": j.state.value, "exit_code": j.exit_code, "attempts": j.attempts}
                    for j in waited.jobs.values()])
    if waited.late:
        click.echo(f"queuectl: timed out after {timeout:g} s waiting for {', '.join(waited.late)}", err=True)
        return EXIT_TIMEOUT
    for j in waited.failed:
        click.echo(not_completed(j), err=True)
    return 1 if waited.failed else 0


def follow_job(store, job_id: str, waiting, wait_style: bool, print_id: bool = False) -> int:
    """Follow job `job_id`'s output (queuectl.api.following) until it ends, after printing its id (`print_id`),
    riding out outages with `waiting` (a queuectl.api.outage.Patience); return the exit status: as `wait`
    gives it (`wait_style`: 0 or 1, with a line for a job that did not complete), else as `enqueue --wait`
    does. Ctrl+C stops the following only (130)."""
    try:
        if print_id:
            click.echo(job_id)  # first (flushed), for a script that reads it while the job runs
        sys.stdout.flush()
        job = follow_output(store, job_id, sys.stdout.buffer, sys.stderr.buffer, note, patience=waiting)
    except KeyboardInterrupt:
        click.echo(f"queuectl: stopped following; the job goes on: queuectl logs -f {job_id}", err=True)
        return 130
    if not wait_style:
        return exit_status(job)
    if job.state != JobState.COMPLETED:
        click.echo(not_completed(job), err=True)
        return 1
    return 0


def not_completed(job) -> str:
    """The line `wait` prints for a job that ended without completing: its state and last error (escaped)."""
    return f"job {job.id} {job.state.value}: {printable(job.last_error or 'no error recorded')}"


def _attempt_note(quiet: bool):
    """Where a wait says each failed attempt (queuectl.api.waiting.Attempts): a line on stderr, or nowhere (quiet)."""
    return None if quiet else (lambda line: click.echo(line, err=True))


def wait_for_enqueued(store, printed: list[str], waiting, quiet: bool) -> int:
    """`enqueue --wait`: print the ids (`printed`: one per job, a key's holder's for a matched one), wait
    for those jobs (riding out outages with `waiting`; a line per failed attempt unless `quiet`), say each
    that did not complete, and return their exit status (Waited.status)."""
    try:
        click.echo("\n".join(printed))  # the ids first (flushed), for a script that reads them while the jobs run
        waited = wait_enqueued(store, printed, waiting, _attempt_note(quiet))
    except KeyboardInterrupt:
        return _stopped_waiting(list(dict.fromkeys(printed)), "the job goes on")
    for job in waited.failed:
        click.echo(not_completed(job), err=True)
    return waited.status


def _stopped_waiting(job_ids: list[str], goes_on: str) -> int:
    """After Ctrl+C while waiting: say how to wait again; return the exit status, 130 (as a shell's)."""
    click.echo(f"queuectl: stopped waiting; {goes_on}: queuectl wait {' '.join(job_ids)}", err=True)
    return 130
