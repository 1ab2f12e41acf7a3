"""`queuectl enqueue`, and the waiting and following that it shares with `wait` and `logs -f`.

A module of its own: `queuectl enqueue` is the command scripts run most, and builds only itself.
"""

from __future__ import annotations

import sys
import time

import click

from queuectl.api import jobs as api
from queuectl.cli.common import Seconds, note, outage_doc, pass_app, patience, quiet_option
from queuectl.domain.errors import InvalidInput
from queuectl.domain.models import JobState, printable


class ArgvCommand(click.Command):
    """A command that takes what follows the first `--` of its arguments as an argv of its own, unparsed
    (`ctx.meta["argv"]`, None without `--`): `queuectl enqueue [OPTIONS] -- COMMAND [ARG]...`. Click
    itself would take the argv for its positional arguments, and could not tell `-- '{...}'` from JSON."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            args, ctx.meta["argv"] = args[:at], args[at + 1:]
        return super().parse_args(ctx, args)


#: The job fields the argv form takes as options (the JSON form's names): option, field, Click type, metavar.
JOB_OPTIONS = (("--id", "id", str, "ID"), ("--queue", "queue", str, "NAME"), ("--priority", "priority", int, "N"),
               ("--max-retries", "max_retries", int, "N"), ("--timeout", "timeout", Seconds(), "SECONDS"),
               ("--delay", "delay", Seconds(), "SECONDS"), ("--run-at", "run_at", str, "TIME"),
               ("--cwd", "cwd", str, "DIR"), ("--key", "key", str, "KEY"))


_UNITS = {"SECONDS": "; or 90s, 10m, 1h", "TIME": "; ISO-8601 with offset"}


def job_options(command):
    """Add the argv form's job options (JOB_OPTIONS, and --after, which may repeat) to `command`."""
    command = click.option("--after", "after", multiple=True, metavar="ID",
                           help="With --: run after job ID has completed (again for more).")(command)
    for option, field, kind, metavar in reversed(JOB_OPTIONS):
        command = click.option(option, field, type=kind, default=None, metavar=metavar,
                               help=f"With --: the job's {field} (as the JSON field{_UNITS.get(metavar, '')}).")(
            command)
    return command


@click.command(cls=ArgvCommand)
@click.argument("job", required=False, metavar="[JSON | -- COMMAND [ARG]...]")
@click.option("--file", "-f", "file", type=click.File("rb"), metavar="FILE",
              help="Read one JSON job per line from FILE ('-' for stdin); all or none are enqueued.")
@job_options
@click.option("--wait", "wait_", is_flag=True,
              help="Then wait until the job has ended, and exit as its command did (0 when it completed).")
@click.option("--follow", is_flag=True,
              help="Then print its output as it is written (as `logs -f`), and exit as --wait does.")
@quiet_option
@pass_app
@outage_doc
def enqueue(app, job, file, wait_, follow, quiet, **fields):
    """Add a job to the queue and print its id.

    \b
    queuectl enqueue [OPTIONS] JSON
    queuectl enqueue [OPTIONS] --file FILE
    queuectl enqueue [OPTIONS] -- COMMAND [ARG]...

    After --, COMMAND and its ARGs are the job's command, run as they are, with no shell
    reading them ($, ;, quotes and globs stay as typed); --id, --queue and the options
    after them give the job's other fields, as the JSON fields of the same names do.

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
      queuectl enqueue --queue build --timeout 10m -- make -C /srv/site
      queuectl enqueue --wait '{"command":"make -C /srv/site"}' && ./deploy
      queuectl enqueue --follow '{"command":"make -C /srv/site"}'

    With --wait it exits 0 when the job completed; when it ended otherwise, with its
    last attempt's exit code if it had one, 124 if that attempt timed out, else 1
    (cancelled, could not start). With --file: the first job, in file order, that did
    not complete decides. While it waits, each attempt that fails is one line on stderr
    ("job ID: attempt 2 of 4 failed (exit code 3): retry in 4 s"; --quiet leaves them
    out), and each job that did not complete one line at the end (its last error).
    --follow prints the job's output as it runs (as `logs -f`) and exits as --wait does.
    Ctrl+C stops the waiting only: the jobs go on. The waiting
    rides out an outage of the database (a line on stderr says so) for up to OUTAGE_LIMIT,
    then exits 1; the enqueue itself does not wait for it.
    """
    argv = click.get_current_context().meta.get("argv")
    _check_form(job, file, argv, fields)
    if follow and (file is not None or wait_):
        raise InvalidInput("--follow follows one job: give one job, without --file or --wait")
    # Validation only: the store sets each relative job's run_at from its own clock (store.now()).
    checked_at = time.time()
    waiting = patience() if wait_ or follow else None  # its setting checked before anything is enqueued
    if argv is not None:
        jobs, lines = [api.parse_argv(argv, {**fields, "after": list(fields["after"])}, checked_at)], None
    elif file is None:
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
    return _wait_for_enqueued(store, [e.id for e in done], waiting, quiet)


def _check_form(job, file, argv, fields: dict) -> None:
    """Refuse (InvalidInput, exit 2) all but one of the three forms: JSON, --file FILE, -- COMMAND [ARG]...; and
    the job options without the last (the other two give the fields themselves)."""
    given = [form for form, value in (("a JSON job", job), ("--file", file), ("-- COMMAND", argv)) if value is not None]
    if not given:
        raise InvalidInput("give a JSON job, --file FILE or -- COMMAND [ARG]... (see 'queuectl enqueue --help')")
    if len(given) > 1:
        raise InvalidInput(f"give one of a JSON job, --file FILE or -- COMMAND [ARG]..., not {' and '.join(given)}")
    options = [option for option, field, _, _ in JOB_OPTIONS if fields[field] is not None] + (
        ["--after"] if fields["after"] else [])
    if options and argv is None:
        raise InvalidInput(f"{', '.join(options)} {'goes' if len(options) == 1 else 'go'} with -- COMMAND [ARG]...;"
                           " a JSON job gives its fields itself")


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
    """The line `wait` prints for a job that ended without completing: its state and last error (escaped)."""
    return f"job {job.id} {job.state.value}: {printable(job.last_error or 'no error recorded')}"


def _attempt_note(quiet: bool):
    """Where a wait says each failed attempt (queuectl.api.waiting.Attempts): a line on stderr, or nowhere (quiet)."""
    return None if quiet else (lambda line: click.echo(line, err=True))


def _wait_for_enqueued(store, printed: list[str], waiting, quiet: bool) -> int:
    """`enqueue --wait`: print the ids (`printed`: one per job, a key's holder's for a matched one), wait
    for those jobs (riding out outages with `waiting`; a line per failed attempt unless `quiet`), say each
    that did not complete, and return their exit status (Waited.status)."""
    _ready_for_ctrl_c()
    try:
        click.echo("\n".join(printed))  # the ids first (flushed), for a script that reads them while the jobs run
        waited = api.wait_enqueued(store, printed, waiting, _attempt_note(quiet))
    except KeyboardInterrupt:
        return _stopped_waiting(list(dict.fromkeys(printed)), "the job goes on")
    for job in waited.failed:
        click.echo(_not_completed(job), err=True)
    return waited.status


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
