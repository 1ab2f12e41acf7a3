"""The queuectl command line: Click commands that parse, call one queuectl.api function, and print.

This package is the only place that knows Click. Domain errors are turned into one
line on stderr and an exit code here, in `EXIT_CODES`.
"""

from __future__ import annotations

import sys

import click

from queuectl import __version__
from queuectl.api.database import ENVIRONMENT, OPTION, Database
from queuectl.cli.common import LazyGroup
from queuectl.domain.errors import Interrupted, InvalidConfig, InvalidInput, QueuectlError
from queuectl.host.journal import stderr_is_journal

#: Exit codes, most specific class first. Click's own usage errors exit 2 as well.
EXIT_CODES: tuple[tuple[type[QueuectlError], int], ...] = (
    (InvalidConfig, 78),
    (Interrupted, 130),
    (InvalidInput, 2),
    (QueuectlError, 1),
)


def exit_code_for(error: QueuectlError) -> int:
    """Return the documented exit code of a domain error."""
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


#: Each command: the module that defines it ("module:attr"), imported only when that command runs or shows its
#: own help, and its short help (the first sentence of its help), which `queuectl --help` lists without
#: importing the module (queuectl.cli.common.LazyGroup). So `queuectl enqueue` pays for nothing of the worker,
#: and --help for no command.
COMMANDS = {
    "enqueue": ("queuectl.cli.enqueue:enqueue",
                "Add a job to the queue and print its id."),
    "list": ("queuectl.cli.jobs:list_",
             "List jobs, newest first."),
    "show": ("queuectl.cli.jobs:show",
             "Show one job's record, and its attempts that ended without completing (the newest 100), oldest"
             " first."),
    "logs": ("queuectl.cli.waiting:logs",
             "Print the output a job's last run captured: its stdout on stdout, its stderr on stderr."),
    "status": ("queuectl.cli.status:status",
               "Show job counts by state and queue (with their limits), the schedules, the keys held, and the"
               " workers."),
    "history": ("queuectl.cli.history:history",
                "Show what the workers did: per queue and minute (or hour), the jobs that started, completed,"
                " failed (a retry scheduled), went dead, were cancelled and were recovered from lost workers, with"
                " the 50th and 95th percentiles of their wait (due to start) and run (start to end) times."),
    "wait": ("queuectl.cli.waiting:wait",
             "Wait until every job named has ended: completed, dead or cancelled."),
    "worker": ("queuectl.cli.worker:worker",
               "Run and stop workers."),
    "dlq": ("queuectl.cli.dlq:dlq",
            "Inspect and retry dead jobs (the dead letter queue)."),
    "config": ("queuectl.cli.config:config",
               "Read and change settings (stored in the database, shared by every worker)."),
    "cancel": ("queuectl.cli.ops:cancel",
               "Cancel jobs: pending, blocked and failed ones at once, running ones by their worker."),
    "retry": ("queuectl.cli.ops:retry",
              "Move dead or cancelled jobs back to pending, attempts reset to 0 (all or none)."),
    "pause": ("queuectl.cli.ops:pause",
              "Stop workers from claiming jobs of these queues; running jobs finish, enqueue still works."),
    "resume": ("queuectl.cli.ops:resume",
               "Let workers claim jobs of paused queues again."),
    "purge": ("queuectl.cli.ops:purge",
              "Delete finished jobs and their output now, as retention does, and give the space back."),
    "metrics": ("queuectl.cli.status:metrics",
                "Print the queue's metrics in the Prometheus text format."),
    "schedule": ("queuectl.cli.schedules:schedule",
                 "Recurring jobs: a job template enqueued at each slot of a cron expression or an interval."),
    "limit": ("queuectl.cli.limits:limit",
              "Limit how many jobs of QUEUE run at once, or start per window, across every worker and host."),
    "top": ("queuectl.cli.top:top",
            "Watch the queue live in the terminal: jobs by state and queue, throughput, workers, running jobs,"
            " schedules and the dead letter queue; pause, cancel and retry by key (? lists the keys, q quits)."),
    "web": ("queuectl.cli.web:web",
            "Serve the dashboard: the queue live in a browser, with actions for operators."),
    "web-user": ("queuectl.cli.webuser:web_user",
                 "Manage the dashboard's users file: NAME:ROLE:BCRYPT-HASH lines (roles: viewer, operator)."),
}


class QueuectlGroup(LazyGroup):
    """A group whose errors are one line on stderr, never a traceback or a usage dump; its commands load
    from COMMANDS."""

    def invoke(self, ctx: click.Context):
        """Click's invoke; Ctrl+C (KeyboardInterrupt) becomes Interrupted before Click's main sees it (which
        would print an empty line, then "aborted")."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            if sys.stderr.isatty():
                click.echo(err=True)  # past the terminal's ^C
            raise Interrupted("interrupted: what was done before it stays done") from None

    def main(self, args=None, prog_name=None, **extra):  # noqa: D102 (Click's signature)
        extra.pop("standalone_mode", None)
        try:
            rv = super().main(args, prog_name or "queuectl", standalone_mode=False, **extra)
        except click.UsageError as e:
            if _from_environment(e):  # e.g. a unit's environment file: restarting will not fix it
                _fail(f"{e.format_message()} (from the environment)", exit_code_for(InvalidConfig()))
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            if isinstance(e, click.NoSuchOption) and e.option_name == "--db":
                hint = " (--db goes before the command: queuectl --db PATH COMMAND ...)"
            _fail(e.format_message() + hint, e.exit_code)
        except click.ClickException as e:
            _fail(e.format_message(), e.exit_code)
        except click.Abort:
            _fail("aborted", 1)
        except QueuectlError as e:
            _fail(str(e), exit_code_for(e))
        sys.exit(rv if isinstance(rv, int) else 0)


def _from_environment(error: click.UsageError) -> bool:
    """Return True if the bad value came from an environment variable."""
    param = getattr(error, "param", None)
    if error.ctx is None or param is None or param.name is None:
        return False
    return error.ctx.get_parameter_source(error.param.name) == click.core.ParameterSource.ENVIRONMENT


def _fail(message: str, code: int):
    prefix = "<3>" if stderr_is_journal() else ""  # an error to `journalctl -p err`, as sd-daemon(3) has it
    message = " ".join(message.splitlines())  # one line, whatever a value it quotes holds (a URI's dbname: %0A)
    click.echo(f"{prefix}queuectl: error: {message}", err=True)
    sys.exit(code)


@click.group(cls=QueuectlGroup, table=COMMANDS, short_help="a durable job queue for shell commands",
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", metavar="PATH|URI", envvar="QUEUECTL_DB",
              help="SQLite database file, or PostgreSQL URI (postgresql://user@host/dbname; keep passwords in"
                   " ~/.pgpass) [env QUEUECTL_DB; default: db in /etc/queuectl/queuectl.conf (env QUEUECTL_CONFIG"
                   " names another file), else $XDG_DATA_HOME/queuectl/queuectl.db]")
@click.version_option(__version__, prog_name="queuectl")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """queuectl: a durable job queue for shell commands.

    \b
    Examples:
      queuectl enqueue '{"id":"job1","command":"sleep 2"}'
      queuectl worker start --count 2
      queuectl status
      queuectl dlq list
    """
    if db is not None and not db.strip():
        raise InvalidInput("--db (or QUEUECTL_DB) is empty: give a database path")
    source = ctx.get_parameter_source("db")
    ctx.obj = Database(db, ENVIRONMENT if source == click.core.ParameterSource.ENVIRONMENT else OPTION)
    ctx.call_on_close(ctx.obj.close)


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="queuectl")
