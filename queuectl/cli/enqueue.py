"""`queuectl enqueue`, and the waiting and following that it shares with `wait` and `logs -f`.

A module of its own: `queuectl enqueue` is the command scripts run most, and builds only itself.
"""

from __future__ import annotations

import sys
import time

import click

from queuectl.api import jobs as api
from queuectl.cli.common import note, outage_doc, pass_app, patience
from queuectl.errors import InvalidInput
from queuectl.models import JobState


@click.command()
@click.argument("job", required=False, metavar="JSON")
@click.option("--file", "-f", "file", type=click.File("rb"), metavar="FILE",
              help="Read one JSON job per line from FILE ('-' for stdin); all or none are enqueued.")
@click.option("--wait", "wait_", is_flag=True,
              help="Then wait until the job has ended, and exit as its command did (0 when it completed).")
@click.option("--follow", is_flag=True,
              help="Then print its output as it is written (as `logs -f`), and exit as --wait does.")
@pass_app
@outage_doc
def enqueue(app, job, file, wait_, follow):
    """Add a job to the queue and print its id.

    JSON is an object with `command` (required) and optionally `id`, `queue`, `priority`
    (higher runs first), `max_retries`, `run_at` (ISO-8601 with offset) or `delay`
    (seconds), `timeout` (seconds), `cwd` (absolute path), `key`: while a job with
    the same key has not ended, nothing is added and that job's id is printed; and
    `after`, a job id or a list of them: the job is blocked until they have completed,
    and cancelled if one ends dead or cancelled (at once, if one already has).

    \b
    Examples:
      queuectl enqueue '{"id":"job1","command":"sleep 2"}'
      queuectl enqueue '{"command":"make -C /srv/site","queue":"build","timeout":600}'
      queuectl enqueue '{"command":"/usr/local/bin/backup","key":"nightly-backup"}'
      queuectl enqueue '{"id":"test","command":"make test","after":"build"}'
      queuectl enqueue --file jobs.jsonl
      queuectl enqueue --wait '{"command":"make -C /srv/site"}' && ./deploy
      queuectl enqueue --follow '{"command":"make -C /srv/site"}'

    With --wait it exits 0 when the job completed; when it ended otherwise, with its
    last attempt's exit code if it had one, 124 if that attempt timed out, else 1
    (cancelled, could not start). With --file: the first job, in file order, that did
    not complete decides. --follow prints the job's output as it runs (as `logs -f`)
    and exits as --wait does. Ctrl+C stops the waiting only: the jobs go on. The waiting
    rides out an outage of the database (a line on stderr says so) for up to OUTAGE_LIMIT,
    then exits 1; the enqueue itself does not wait for it.
    """
    if (job is None) == (file is None):
        raise InvalidInput("give one JSON job or --file FILE")
    if follow and (file is not None or wait_):
        raise InvalidInput("--follow follows one job: give one JSON job, without --file or --wait")
    # Validation only: the store sets each relative job's run_at from its own clock (store.now()).
    checked_at = time.time()
    waiting = patience() if wait_ or follow else None  # its setting checked before anything is enqueued
    if file is None:
        jobs, lines = [api.parse_one(job, checked_at)], None
    else:
        jobs, lines = api.parse_jobs(file, checked_at)
    store = app.store()
    done = api.enqueue(store, jobs, lines)
    for index, (job, result) in enumerate(zip(jobs, done)):
        where = "" if lines is None else f"line {lines[index]}: "
        if result.held is not None:
            click.echo(f"{where}key {job.key!r} is held by job {result.id} ({result.held.value}); nothing added",
                       err=True)
        elif result.cancelled is not None:
            click.echo(f"{where}job {job.id} is cancelled at once: {result.cancelled}", err=True)
    if follow:
        return _follow(store, done[0].id, waiting, wait_style=False, print_id=True)
    if not wait_:
        click.echo("\n".join(e.id for e in done))
        return None
    return _wait_for_enqueued(store, [e.id for e in done], waiting)


def _follow(store, job_id: str, waiting, wait_style: bool, print_id: bool = False) -> int:
    """Follow job `job_id`'s output (queuectl.api.following) until it ends, after printing its id (`print_id`),
    riding out outages with `waiting` (a queuectl.api.outage.Patience); return the exit status: as `wait`
    gives it (`wait_style`: 0 or 1, with a line for a job that did not complete), else as `enqueue --wait`
    does. Ctrl+C stops the following only (130)."""
    from queuectl.api.waiting import exit_status

    _ready_for_ctrl_c()
    try:
        if print_id:
            click.echo(job_id)  # first (flushed), for a script that reads it while the job runs
        sys.stdout.flush()
        job = api.follow(store, job_id, sys.stdout.buffer, sys.stderr.buffer, note, waiting)
    except KeyboardInterrupt:
        click.echo(f"queuectl: stopped following; the job goes on: queuectl logs -f {job_id}", err=True)
        return 130
    if not wait_style:
        return exit_status(job)
    if job.state != JobState.COMPLETED:
        click.echo(_not_completed(job), err=True)
        return 1
    return 0


def _not_completed(job) -> str:
    """The line `wait` prints for a job that ended without completing."""
    return f"job {job.id} {job.state.value}: {job.last_error or 'no error recorded'}"


def _wait_for_enqueued(store, printed: list[str], waiting) -> int:
    """`enqueue --wait`: print the ids (`printed`: one per job, a key's holder's for a matched one), wait
    for those jobs (riding out outages with `waiting`), and return their exit status (api.wait_status)."""
    _ready_for_ctrl_c()
    try:
        click.echo("\n".join(printed))  # the ids first (flushed), for a script that reads them while the jobs run
        return api.wait_status(store, printed, waiting)
    except KeyboardInterrupt:
        return _stopped_waiting(list(dict.fromkeys(printed)), "the job goes on")


def _ready_for_ctrl_c() -> None:
    """Import what a wait runs before the wait can be interrupted (before the ids are printed).

    Its modules are loaded lazily (a plain enqueue does without them), but a Ctrl+C that lands
    inside an import does not reliably reach the caller as KeyboardInterrupt: Python wraps it in a
    RuntimeError when it interrupts a class's creation (dataclass fields' __set_name__), and under
    `python -m` it could end the process by SIGINT after the wait had said it stopped.
    """
    import importlib

    for module in ("queuectl.api.waiting", "queuectl.api.following", "queuectl.api.outage"):
        importlib.import_module(module)


def _stopped_waiting(job_ids: list[str], goes_on: str) -> int:
    """After Ctrl+C while waiting: say how to wait again; return the exit status, 130 (as a shell's)."""
    click.echo(f"queuectl: stopped waiting; {goes_on}: queuectl wait {' '.join(job_ids)}", err=True)
    return 130
