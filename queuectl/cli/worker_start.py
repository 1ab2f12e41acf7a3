"""`queuectl worker start`: a module of its own, as it imports the whole worker (queuectl.api.starting), which
`worker stop` and `worker --help` do without."""

from __future__ import annotations

import os
import sys

import click

from queuectl.api.starting import worker_for, worker_store
from queuectl.cli.common import MOST_SLOTS, note, pass_app
from queuectl.domain.errors import InvalidInput
from queuectl.host import logsetup
from queuectl.host.daemonize import detach


@click.command()
@click.option("--count", "-c", type=click.IntRange(1, MOST_SLOTS), default=1, show_default=True,
              envvar="QUEUECTL_WORKER_COUNT", help="Jobs run at once (slots) [env QUEUECTL_WORKER_COUNT].")
@click.option("--queue", "-q", "queues", multiple=True, metavar="NAME", envvar="QUEUECTL_WORKER_QUEUES",
              help="Take jobs from this queue only; repeat for several (default: every queue)"
                   " [env QUEUECTL_WORKER_QUEUES, separated by spaces or commas].")
@click.option("--burst", is_flag=True, help="Exit 0 once no job is ready, waiting for a retry, or running.")
@click.option("--name", metavar="NAME", envvar="QUEUECTL_WORKER_NAME",
              help="Worker name, unique among live workers [default: HOST-PID].")
@click.option("--verbose", "-v", is_flag=True, help="Log each job's start too (DEBUG), not only its end.")
@click.option("--daemon", is_flag=True, help="Detach from the terminal (for hosts without systemd).")
@click.option("--pidfile", type=click.Path(dir_okay=False), help="With --daemon: write the worker's pid here.")
@click.option("--log-file", type=click.Path(dir_okay=False),
              help="With --daemon: append the log here [default: worker-NAME.log beside a SQLite database,"
                   " in ~/.local/state/queuectl with PostgreSQL].")
@pass_app
def start(app, count, queues, burst, name, verbose, daemon, pidfile, log_file):
    """Run a worker until stopped: in the foreground, as a systemd service, or detached (--daemon).

    SIGTERM, Ctrl+C, `queuectl worker stop` or `systemctl stop` drain it: it claims
    nothing more, lets running jobs finish and exits 0. A second signal stops running
    jobs and puts them back to pending without using an attempt. Under systemd
    (NOTIFY_SOCKET set) it reports READY, STATUS and STOPPING and pings the watchdog.

    Its database: `queuectl --db PATH worker start` (--db before the command), else
    QUEUECTL_WORKER_DB, else QUEUECTL_DB, else worker-db in /etc/queuectl/queuectl.conf, else db
    there, else ~/.local/share/queuectl/queuectl.db ($XDG_DATA_HOME). On PostgreSQL a worker needs a
    connection of its own (it LISTENs): one through a pooler in transaction mode is refused (exit 78).

    \b
    Examples:
      queuectl worker start --count 4
      queuectl worker start --queue build --queue deploy --name builder
      queuectl worker start --burst
      queuectl worker start --daemon --pidfile /run/user/1000/queuectl.pid
    """
    app.for_worker()
    source = click.get_current_context().get_parameter_source
    if (pidfile or log_file) and not daemon:
        raise InvalidInput("--pidfile and --log-file go with --daemon")
    environment = [p for p in ("name", "queues") if source(p) == click.core.ParameterSource.ENVIRONMENT]

    def make_worker(name):
        return worker_for(lambda: worker_store(app, wait=not burst, say=note), name=name, slots=count, queues=queues,
                          burst=burst, unit=os.environ.get("QUEUECTL_UNIT") or None, from_environment=environment)

    if daemon:
        if os.environ.get("NOTIFY_SOCKET"):
            raise InvalidInput("--daemon cannot run under systemd (NOTIFY_SOCKET is set): the unit starts the"
                               " worker in the foreground")
        if not app.is_postgres:
            app.db = os.path.abspath(app.db_path())  # the daemon works in /: a relative path must keep its file
        # Check the database and settings while errors can still reach the terminal. Close the
        # check's selector now: the daemon closes every inherited fd, and a late garbage collection
        # of this epoll object would then close the daemon's own selector, reusing the same number.
        checked = make_worker(name)
        checked.runner.close()
        name = checked.name  # the daemon's too (by default HOST-PID of this process), and its log file's
        app.close()
        log_file = os.path.abspath(log_file or os.path.join(app.log_dir(), f"worker-{name}.log"))
        detach(pidfile and os.path.abspath(pidfile), log_file)  # from here on we are the daemon
    logsetup.configure(verbose=verbose)
    sys.exit(make_worker(name).run())
