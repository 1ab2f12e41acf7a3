"""The queuectl command line: Click commands that parse, call one queuectl.api function, and print.

This package is the only place that knows Click. Domain errors are turned into one
line on stderr and an exit code here, in `EXIT_CODES`.
"""

from __future__ import annotations

import importlib
import sys

import click

from queuectl import __version__
from queuectl.api.database import ENVIRONMENT, OPTION, Database
from queuectl.cli.common import HelpGroup
from queuectl.domain.errors import Interrupted, InvalidConfig, InvalidInput, QueuectlError

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


#: Each command and the module that defines it, imported only when that command runs (or for
#: --help), so `queuectl enqueue` does not pay for the worker's imports.
COMMANDS = {
    "enqueue": "queuectl.cli.enqueue:enqueue",
    "list": "queuectl.cli.jobs:list_",
    "show": "queuectl.cli.jobs:show",
    "logs": "queuectl.cli.jobs:logs",
    "status": "queuectl.cli.status:status",
    "history": "queuectl.cli.history:history",
    "wait": "queuectl.cli.jobs:wait",
    "worker": "queuectl.cli.worker:worker",
    "dlq": "queuectl.cli.dlq:dlq",
    "config": "queuectl.cli.config:config",
    "cancel": "queuectl.cli.ops:cancel",
    "retry": "queuectl.cli.ops:retry",
    "pause": "queuectl.cli.ops:pause",
    "resume": "queuectl.cli.ops:resume",
    "purge": "queuectl.cli.ops:purge",
    "metrics": "queuectl.cli.ops:metrics",
    "schedule": "queuectl.cli.schedules:schedule",
    "limit": "queuectl.cli.limits:limit",
    "top": "queuectl.cli.top:top",
    "web": "queuectl.cli.web:web",
    "web-user": "queuectl.cli.web:web_user",
}


class QueuectlGroup(HelpGroup):
    """A group whose errors are one line on stderr, never a traceback or a usage dump.

    Subcommands load lazily from COMMANDS (the pattern of Click's documentation,
    "Lazily Loading Subcommands").
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            module, attr = COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)

    def load_all(self) -> None:
        """Import every subcommand (for tools that walk `commands`, such as click-man)."""
        for name in COMMANDS:
            self.get_command(None, name)

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
    from queuectl.host.logsetup import stderr_is_journal

    prefix = "<3>" if stderr_is_journal() else ""  # an error to `journalctl -p err`, as sd-daemon(3) has it
    message = " ".join(message.splitlines())  # one line, whatever a value it quotes holds (a URI's dbname: %0A)
    click.echo(f"{prefix}queuectl: error: {message}", err=True)
    sys.exit(code)


@click.group(cls=QueuectlGroup, short_help="a durable job queue for shell commands",
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
