"""Commands for the dead letter queue: jobs that used up their retries."""

from __future__ import annotations

import click

from queuectl.cli.common import MOST_LISTED, HelpGroup, json_option, note_truncation, pass_app, print_json, print_table
from queuectl.domain.models import JobState, iso, one_line, printable
from queuectl.api.jobs import list_jobs
from queuectl.api.ops import dlq_retry


@click.group(cls=HelpGroup)
def dlq():
    """Inspect and retry dead jobs (the dead letter queue).

    \b
    Examples:
      queuectl dlq list
      queuectl dlq retry job1
    """


@dlq.command(name="list")
@click.option("--limit", type=click.IntRange(1, MOST_LISTED), default=100, show_default=True,
              help="At most this many jobs.")
@json_option
@pass_app
def list_(app, limit, as_json):
    """List dead jobs, newest first, with their last error.

    \b
    Example:
      queuectl dlq list --json
    """
    jobs, total = list_jobs(app.store(), JobState.DEAD.value, None, limit)
    if as_json:
        print_json([j.to_dict() for j in jobs])
        return
    print_table(
        ["ID", "QUEUE", "ATTEMPTS", "DIED", "LAST ERROR", "COMMAND"],
        [[j.id, j.queue, j.attempts, iso(j.finished_at), printable(j.last_error or ""), one_line(j.command, 40)]
         for j in jobs],
    )
    note_truncation(len(jobs), total)


@dlq.command()
@click.argument("job_ids", nargs=-1, required=True, metavar="ID...")
@pass_app
def retry(app, job_ids):
    """Move dead jobs back to pending with their attempts reset to 0 (all or none).

    \b
    Example:
      queuectl dlq retry job1
    """
    states = dlq_retry(app.store(), job_ids)
    for job_id, state in zip(job_ids, states):
        click.echo(f"{job_id}: {state.value}")
