"""Operator commands: cancel, retry, pause and resume, purge (metrics: queuectl.cli.status)."""

from __future__ import annotations

import click

from queuectl.api import ops as api
from queuectl.cli.common import Seconds, json_option, pass_app, patience, print_json
from queuectl.domain.errors import QueuectlError
from queuectl.domain.models import JobState

CANCELLABLE = click.Choice([s.value for s in api.CANCELLABLE])


@click.command()
@click.argument("job_ids", nargs=-1, metavar="[ID]...")
@click.option("--queue", "-q", metavar="NAME", help="With no ID: cancel the jobs of this queue.")
@click.option("--state", "-s", "states", multiple=True, type=CANCELLABLE,
              help="With no ID: cancel the jobs in this state; repeat for several [default: pending, blocked,"
                   " failed and processing].")
@click.option("--wait", type=Seconds(), default=api.CANCEL_WAIT, show_default=True,
              help="How long to wait for running jobs to be stopped before reporting: seconds, or 30s, 2m.")
@json_option
@pass_app
def cancel(app, job_ids, queue, states, wait, as_json):
    """Cancel jobs: pending, blocked and failed ones at once, running ones by their worker.

    Jobs after a cancelled one (its dependants, and theirs) are cancelled with it.

    A running job's process group gets SIGTERM, then SIGKILL 5 s later; the job ends
    cancelled (with its output kept), or completed if it exited 0 first. A cancelled job
    is never retried; `queuectl retry` puts it back to pending. Completed, dead and
    cancelled jobs and unknown ids are errors (exit 1); the other ids are cancelled.
    Waiting for running jobs to stop rides out an outage of the database (a line on
    stderr says so) until --wait has passed, then exits 1: the cancel stays requested.

    \b
    Examples:
      queuectl cancel job1 job2
      queuectl cancel --queue build --state pending
      queuectl cancel --state blocked
    """
    waiting = patience()
    report = api.cancel(app.store(), waiting, job_ids, queue, [JobState(s) for s in states], wait)
    if not report:
        click.echo("no jobs to cancel", err=True)
        if as_json:
            print_json([])
        return
    if as_json:
        print_json([item.to_dict() for item in report])
    else:
        for item in report:
            if item.error is None:
                click.echo(f"{item.id}: {item.description}")
    errors = [item.error for item in report if item.error]
    for message in errors[:-1]:
        click.echo(f"queuectl: error: {message}", err=True)
    if errors:
        raise QueuectlError(errors[-1])


@click.command()
@click.argument("job_ids", nargs=-1, required=True, metavar="ID...")
@pass_app
def retry(app, job_ids):
    """Move dead or cancelled jobs back to pending, attempts reset to 0 (all or none).

    A job with dependencies (`after`) not yet completed goes back to blocked; one whose
    dependency is dead or cancelled is refused unless that one is retried with it. A job
    whose idempotency key another job holds now is refused. Each id's new state is printed.

    \b
    Examples:
      queuectl retry job1
      queuectl retry build test    # test is after build
    """
    states = api.retry(app.store(), job_ids)
    for job_id, state in zip(job_ids, states):
        click.echo(f"{job_id}: {state.value}")


def _set_paused(app, queues, paused: bool) -> None:
    word = "paused" if paused else "resumed"
    for name, did in api.set_paused(app.store(), queues, paused):
        click.echo(f"{name}: {word if did else ('already paused' if paused else 'not paused')}")


@click.command()
@click.argument("queues", nargs=-1, required=True, metavar="QUEUE...")
@pass_app
def pause(app, queues):
    """Stop workers from claiming jobs of these queues; running jobs finish, enqueue still works.

    Kept in the database, so it survives restarts, until `queuectl resume`.

    \b
    Example:
      queuectl pause build
    """
    _set_paused(app, queues, True)


@click.command()
@click.argument("queues", nargs=-1, required=True, metavar="QUEUE...")
@pass_app
def resume(app, queues):
    """Let workers claim jobs of paused queues again.

    \b
    Example:
      queuectl resume build
    """
    _set_paused(app, queues, False)


PURGEABLE = click.Choice([s.value for s in api.PURGEABLE])


@click.command()
@click.option("--state", "-s", "states", multiple=True, type=PURGEABLE,
              help="Delete jobs in this state; repeat for several [default: completed, cancelled and dead].")
@click.option("--older-than", metavar="DURATION",
              help="Delete those that finished longer ago than this (90s, 12h, 7d; 0 for all)"
                   " [default: each state's keep-* setting].")
@click.option("--queue", "-q", metavar="NAME", help="Only jobs of this queue.")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@pass_app
def purge(app, states, older_than, queue, dry_run):
    """Delete finished jobs and their output now, as retention does, and give the space back.

    Pending, processing and failed jobs are never deleted. Jobs go in batches of 1,000
    (short transactions that let workers go on). A purged job's id can be used again.
    The first purge of a database made before incremental auto_vacuum compacts it once
    (it needs free disk of about twice its size, and says so if that is missing).

    \b
    Examples:
      queuectl purge --dry-run
      queuectl purge --state completed --older-than 12h --queue build
    """
    done = api.purge(app.store(), states, older_than, queue, dry_run)
    if done.dry_run:
        click.echo(f"would remove {done.removed} job(s)")
        return
    click.echo(f"removed {done.removed} job(s)")
    if done.compacted:
        click.echo(done.compacted, err=done.compacted.startswith("not compacted"))
