"""Commands that run and stop workers."""

from __future__ import annotations

import logging
import sys

import click

from queuectl.cli.common import pass_app
from queuectl.errors import QueuectlError


@click.group(no_args_is_help=False)
def worker():
    """Run and stop workers.

    \b
    Examples:
      queuectl worker start --count 2
      queuectl worker stop
    """


@worker.command()
@click.option("--count", "-c", type=click.IntRange(min=1), default=1, show_default=True,
              help="Jobs run at once (slots).")
@click.option("--queue", "-q", "queues", multiple=True, metavar="NAME",
              help="Take jobs from this queue only; repeat for several (default: every queue).")
@click.option("--burst", is_flag=True, help="Exit 0 once no job is ready, waiting for a retry, or running.")
@click.option("--name", metavar="NAME", help="Worker name, unique among live workers [default: HOST-PID].")
@pass_app
def start(app, count, queues, burst, name):
    """Run a worker in the foreground until stopped.

    SIGTERM, Ctrl+C or `queuectl worker stop` drain it: it claims nothing more, lets
    running jobs finish and exits 0. A second signal stops running jobs and puts them
    back to pending without using an attempt.

    \b
    Examples:
      queuectl worker start --count 4
      queuectl worker start --queue build --queue deploy --name builder
      queuectl worker start --burst
    """
    from queuectl.worker import Worker, check_name, default_name

    name = check_name(name) if name is not None else default_name()  # --name '' is an error, not the default
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s queuectl-worker[%(process)d] %(levelname)s %(message)s")
    w = Worker(app.store(durable=False), name=name, slots=count, queues=tuple(dict.fromkeys(queues)), burst=burst)
    sys.exit(w.run())


@worker.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--timeout", type=click.FloatRange(min=0), default=None,
              help="Seconds to wait for the workers to exit [default: wait until they do].")
@pass_app
def stop(app, names, timeout):
    """Ask running workers on this host (all, or the named ones) to drain and exit; wait for them.

    Exits 1 if a worker is still running when --timeout runs out.

    \b
    Examples:
      queuectl worker stop
      queuectl worker stop builder --timeout 60
    """
    from queuectl.control import select_workers, stop_workers

    targets = select_workers(app.store().workers(), names)
    if not targets:
        click.echo("no workers are running on this host", err=True)
        return
    results = stop_workers(targets, timeout)
    for r in results:
        click.echo(f"{r.name} (pid {r.pid}): {r.outcome}")
    late = [r.name for r in results if r.outcome == "timeout"]
    if late:
        raise QueuectlError(f"still draining after {timeout:g} s: {', '.join(late)}")


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(worker)
