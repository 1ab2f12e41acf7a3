"""`queuectl worker`: the group, and `worker stop`; `worker start` is queuectl.cli.worker_start's, which imports the
whole worker: `worker stop` and `worker --help` do without it."""

from __future__ import annotations

import click

from queuectl.api.workers import stop as stop_workers
from queuectl.cli.common import LazyGroup, Seconds, pass_app, patience
from queuectl.domain.errors import QueuectlError

#: The group's commands not defined here, as queuectl.cli.COMMANDS lists the top level's.
COMMANDS = {
    "start": ("queuectl.cli.worker_start:start",
              "Run a worker until stopped: in the foreground, as a systemd service, or detached (--daemon)."),
}


@click.group(cls=LazyGroup, table=COMMANDS)
def worker():
    """Run and stop workers.

    \b
    Examples:
      queuectl worker start --count 2
      queuectl worker stop
    """


@worker.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--timeout", type=Seconds(), default=None,
              help="How long to wait for the workers to exit: seconds, or 30s, 5m [default: wait until they do].")
@click.option("--force", is_flag=True,
              help="Stop running jobs now and put them back to pending (the second signal).")
@pass_app
def stop(app, names, timeout, force):
    """Ask running workers on this host (all, or the named ones) to drain and exit; wait for them.

    Running the command again while workers drain only waits again; --force stops their
    running jobs and puts them back to pending without using an attempt. Exits 1 if a
    worker is still running when --timeout runs out. While it waits, a line on stderr
    says for what, after 1 s and then every 5 s ("waiting for 2 running jobs: j-41 (12 s),
    j-44 (3 s)"), read from the database (no line while it is unavailable: the stop goes
    on); --force reads whether each worker has taken the first signal, and while the
    database is unavailable (a line on stderr says so) sends the second after 10 s regardless.

    \b
    Examples:
      queuectl worker stop
      queuectl worker stop builder --timeout 60
      queuectl worker stop --force
    """
    waiting = patience()  # a bad QUEUECTL_OUTAGE_LIMIT refused first
    results = stop_workers(app.store(), waiting, names, timeout, force, note=lambda line: click.echo(line, err=True))
    if not results:
        click.echo("no workers are running on this host", err=True)
        return
    for r in results:
        click.echo(f"{r.name} (pid {r.pid}): {r.outcome}")
    late = [r.name for r in results if r.outcome == "timeout"]
    if late:
        raise QueuectlError(f"still draining after {timeout:g} s: {', '.join(late)}")
