"""Commands about jobs: list, show (enqueue: queuectl.cli.enqueue; wait, logs: queuectl.cli.waiting; status:
queuectl.cli.status)."""

from __future__ import annotations

import click

from queuectl.api import jobs as api
from queuectl.cli.common import MOST_LISTED, json_option, note_truncation, pass_app, print_json, print_table
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
