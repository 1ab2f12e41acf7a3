"""Operator commands: cancel, retry, pause and resume."""

from __future__ import annotations

import click

from queuectl.cli.common import Seconds, json_option, pass_app, patience, print_json
from queuectl.errors import InvalidInput, NotFound, QueuectlError
from queuectl.jobspec import check_queue
from queuectl.models import JobState
from queuectl.store import PURGE_BATCH

CANCELLABLE = click.Choice([JobState.PENDING.value, JobState.BLOCKED.value, JobState.FAILED.value,
                            JobState.PROCESSING.value])


@click.command()
@click.argument("job_ids", nargs=-1, metavar="[ID]...")
@click.option("--queue", "-q", metavar="NAME", help="With no ID: cancel the jobs of this queue.")
@click.option("--state", "-s", "states", multiple=True, type=CANCELLABLE,
              help="With no ID: cancel the jobs in this state; repeat for several [default: pending, blocked,"
                   " failed and processing].")
@click.option("--wait", type=Seconds(), default=10.0, show_default=True,
              help="Seconds to wait for running jobs to be stopped before reporting.")
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
    if job_ids and (queue or states):
        raise InvalidInput("give job ids, or --queue/--state, not both")
    if not job_ids and not queue and not states:
        raise InvalidInput("give the ids of the jobs to cancel, or --queue and/or --state")
    waiting = patience()
    store = app.store()
    now = store.now()
    if job_ids:
        results = store.cancel(list(dict.fromkeys(job_ids)), now)
    else:
        chosen = [JobState(s) for s in states] or [JobState.PENDING, JobState.BLOCKED, JobState.FAILED,
                                                   JobState.PROCESSING]
        results = store.cancel_matching(check_queue(queue) if queue else None, chosen, now)
    if not results:
        click.echo("no jobs to cancel", err=True)
        if as_json:
            print_json([])
        return
    finals = _await_stops(store, [r.job_id for r in results if r.result == "requested"], wait, waiting)
    report = []
    for r in results:
        was = r.state.value if r.state else None
        if r.result == "cancelled":
            state = "cancelled"
        elif r.result == "requested":
            state = finals[r.job_id]
        else:
            state = was
        report.append({"id": r.job_id, "was": was, "state": state, "worker": r.worker, "error": r.message})
    if as_json:
        print_json(report)
    else:
        for item in report:
            if item["error"] is None:
                click.echo(f"{item['id']}: {_describe(item)}")
    errors = [item["error"] for item in report if item["error"]]
    for message in errors[:-1]:
        click.echo(f"queuectl: error: {message}", err=True)
    if errors:
        raise QueuectlError(errors[-1])


def _describe(item: dict) -> str:
    if item["was"] != "processing":
        return "cancelled"
    return {"cancelled": "stopped and cancelled",
            "completed": "completed before the cancel took effect",
            "processing": f"cancel requested; worker {item['worker']} is stopping it"}.get(item["state"], item["state"])


#: Seconds between two reads of the jobs whose stop `cancel --wait` waits for.
STOP_POLL = 0.05


def _await_stops(store, job_ids: list[str], wait: float, waiting) -> dict[str, str]:
    """Wait up to `wait` seconds for the jobs to leave processing, riding out outages with `waiting` (a
    queuectl.outage.Patience); return each one's state then. Raises NotFound for a job gone meanwhile."""
    from queuectl.waiting import wait_until

    found, _ = wait_until(store, job_ids, lambda job: job.state != JobState.PROCESSING, waiting, wait, STOP_POLL)
    missing = [j for j in job_ids if j not in found]
    if missing:
        raise NotFound(f"no job with id {missing[0]!r}")
    return {j: found[j].state.value for j in job_ids}


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
    store = app.store()
    states = store.retry(list(job_ids), store.now())
    for job_id, state in zip(job_ids, states):
        click.echo(f"{job_id}: {state.value}")


def _set_paused(app, queues, paused: bool) -> None:
    names = [check_queue(q) for q in dict.fromkeys(queues)]
    store = app.store()
    changed = store.set_paused(names, paused, store.now())
    word = "paused" if paused else "resumed"
    for name, did in zip(names, changed):
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


PURGEABLE = click.Choice([JobState.COMPLETED.value, JobState.CANCELLED.value, JobState.DEAD.value])


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
    from queuectl.settings import RETENTION, parse_duration

    queue = check_queue(queue) if queue else None
    chosen = list(dict.fromkeys(states)) or list(RETENTION)
    store = app.store()
    if older_than is not None:
        age = parse_duration(older_than, "--older-than", forever=False)
        if age is None:
            raise InvalidInput("--older-than forever would delete nothing; give a duration such as 7d")
        ages = dict.fromkeys(chosen, age)
    else:
        settings = store.settings()
        ages = {s: settings[RETENTION[s]] for s in chosen if settings[RETENTION[s]] is not None}
    now = store.now()
    if dry_run:
        click.echo(f"would remove {store.count_purgeable(ages, now, queue)} job(s)")
        return
    removed = 0
    while ages:
        n = store.purge(ages, now, queue)
        removed += n
        if n < PURGE_BATCH:
            break
    click.echo(f"removed {removed} job(s)")
    note = store.compact()
    if note:
        click.echo(note, err=note.startswith("not compacted"))


@click.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write to FILE atomically (a temporary file renamed over it, mode 0644) instead of stdout;"
                   " for node_exporter's textfile collector.")
@pass_app
def metrics(app, output):
    """Print the queue's metrics in the Prometheus text format.

    Jobs by queue and state, the oldest ready job's age per queue, paused queues, queue
    limits, workers by state with busy and total slots, counters of ended runs by outcome,
    and each schedule's last fire, next run and skipped slots.

    \b
    Examples:
      queuectl metrics
      queuectl metrics --output /var/lib/prometheus/node-exporter/queuectl.prom
    """
    import os

    from queuectl.metrics import render
    from queuectl.snapshot import take

    store = app.store()
    if output is not None and not output.strip():
        raise InvalidInput("--output is empty: give a file path")
    text = render(take(store))
    if output is None:
        click.echo(text, nl=False)
        return
    target = os.path.abspath(output)
    if not os.path.isdir(os.path.dirname(target)):
        raise InvalidInput(f"directory {os.path.dirname(target)} does not exist")
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # readable by node_exporter's user whatever the umask
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InvalidInput(f"cannot write {target}: {e.strerror}") from None
