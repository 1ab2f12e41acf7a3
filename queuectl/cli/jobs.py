"""Commands about jobs: list, show, logs, wait (enqueue: queuectl.cli.enqueue; status: queuectl.cli.status)."""

from __future__ import annotations

import sys

import click

from queuectl.api import jobs as api
from queuectl.cli.common import (MOST_LISTED, Seconds, json_option, note_truncation, outage_doc, pass_app, patience,
                                 print_json, print_table, quiet_option)
from queuectl.cli.enqueue import _attempt_note, _follow, _not_completed, _ready_for_ctrl_c, _stopped_waiting
from queuectl.domain.errors import InvalidInput
from queuectl.domain.models import JobState, iso, one_line, printable
from queuectl.domain.jobspec import check_queue

STATE_CHOICE = click.Choice([s.value for s in JobState])


@click.command(name="list")
@click.option("--state", type=STATE_CHOICE, help="Only jobs in this state.")
@click.option("--queue", metavar="NAME", help="Only jobs in this queue.")
@click.option("--limit", type=click.IntRange(1, MOST_LISTED), default=100, show_default=True,
              help="At most this many jobs.")
@json_option
@pass_app
def list_(app, state, queue, limit, as_json):
    """List jobs, newest first.

    \b
    Examples:
      queuectl list --state pending
      queuectl list --queue build --limit 20 --json
    """
    if queue is not None:
        check_queue(queue)  # before the store is opened
    jobs, total = api.list_jobs(app.store(), state, queue, limit)
    if as_json:
        print_json([j.to_dict() for j in jobs])
        return
    print_table(
        ["ID", "STATE", "QUEUE", "PRI", "ATTEMPTS", "CREATED", "COMMAND"],
        [[j.id, j.state.value, j.queue, j.priority, j.attempts, iso(j.created_at), one_line(j.command, 50)]
         for j in jobs],
    )
    note_truncation(len(jobs), total)


@click.command()
@click.argument("job_id", metavar="ID")
@json_option
@pass_app
def show(app, job_id, as_json):
    """Show one job's record, and its attempts that ended without completing (the newest 100), oldest first.

    \b
    Example:
      queuectl show job1
    """
    store = app.store()
    ended = api.attempts(store, job_id)  # read first: the job's record is never older than its attempts
    d = {**api.show(store, job_id).to_dict(), "errors": [a.to_dict() for a in ended]}
    if as_json:
        print_json(d)
        return
    for key, value in d.items():
        if key != "errors":
            click.echo(f"{key + ':':13} {_shown(key, value)}")
    click.echo(f"{'errors:':13} {len(ended) if ended else '-'}")
    if ended and ended[0].n > 1:
        click.echo(f"  ({ended[0].n - 1} earlier not shown)")
    for a in ended:
        click.echo(f"  {attempt_line(a)}")


def attempt_line(a) -> str:
    """One ended attempt (queuectl.store.jobfilter.Attempt) as a line: "attempt 2: failed (exit 3) at TIME after
    1.2 s: ERROR", its error escaped for the terminal (queuectl.domain.models.printable)."""
    code = f" (exit {a.exit_code})" if a.exit_code is not None else f" ({a.end_code})" if a.end_code else ""
    line = f"attempt {a.attempt}: {a.outcome.value}{code} at {iso(a.finished_at) or 'an unknown time'}"
    if a.duration is not None:
        line += f" after {a.duration:.1f} s" if a.duration >= 0.1 else f" after {a.duration * 1000:.0f} ms"
    return line + (f": {printable(a.error)}" if a.error else "")


def _shown(key: str, value) -> str:
    """A field of `show` as text: "never" for a time not set (`..._at`), "-" for any other unset or empty field;
    user data escaped for the terminal (queuectl.domain.models.printable)."""
    if value is None or value == []:
        return "never" if key.endswith("_at") else "-"
    return printable(", ".join(value) if isinstance(value, list) else str(value))


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
        return _follow(app.store(), job_id, waiting, wait_style=True)
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
    _ready_for_ctrl_c()
    try:
        return _wait(app.store(), job_ids, waiting, timeout, as_json, _attempt_note(quiet))
    except KeyboardInterrupt:
        return _stopped_waiting(job_ids, "the jobs go on")


def _wait(store, job_ids: list[str], waiting, timeout: float | None, as_json: bool, note) -> int:
    """`wait`'s work (see it), once the store is open, riding out outages with `waiting`, a line per failed
    attempt to `note` (None: none); returns the exit code."""
    from queuectl.api.waiting import EXIT_TIMEOUT

    waited = api.wait(store, job_ids, waiting, timeout, note)
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
        click.echo(_not_completed(j), err=True)
    return 1 if waited.failed else 0
