"""`queuectl enqueue`.

A module of its own: `queuectl enqueue` is the command scripts run most, and builds only itself. With --wait
or --follow it waits as `wait` and `logs -f` do (queuectl.cli.waiting), which a plain enqueue does not import.
"""

from __future__ import annotations

import time

import click

from queuectl.api import jobs as api
from queuectl.cli.common import Seconds, outage_doc, pass_app, patience, quiet_option
from queuectl.domain.errors import InvalidInput


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
    if wait_ or follow:
        # seam: enqueue --wait and --follow (what `wait` and `logs -f` run, which a plain enqueue does without:
        # tests/unit/test_startup.py), imported before anything is enqueued or waited for
        from queuectl.cli import waiting as waits

        waiting = patience()  # its setting checked before anything is enqueued
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
        return waits.follow_job(store, done[0].id, waiting, wait_style=False, print_id=True)
    if not wait_:
        click.echo("\n".join(e.id for e in done))
        return None
    return waits.wait_for_enqueued(store, [e.id for e in done], waiting, quiet)


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
