"""What every command shares: groups whose commands load from a table, the context object (the database), --json,
table printing, notes on stderr."""

from __future__ import annotations

import importlib
import json
from typing import Mapping

import click

from queuectl.api.database import Database
from queuectl.api.outage import Patience, limit_text
from queuectl.domain.errors import InvalidInput
from queuectl.domain.settings import parse_duration


class HelpGroup(click.Group):
    """A command group that, run without a subcommand, prints its help on stdout and exits 0.

    As git and systemctl do, and as Click 8.1 did by default; Click 8.2's `no_args_is_help`
    prints the help as an error (stderr, exit 2) instead. The group's own callback runs
    first, so its options are still checked. A subcommand is also found by an alias (ALIASES).
    """

    def __init__(self, *args, **kwargs):
        kwargs["invoke_without_command"] = True
        kwargs["no_args_is_help"] = False
        super().__init__(*args, **kwargs)
        callback = self.callback

        def help_without_subcommand(*cb_args, **cb_kwargs):
            rv = callback(*cb_args, **cb_kwargs) if callback is not None else None
            ctx = click.get_current_context()
            if ctx.invoked_subcommand is None:
                click.echo(ctx.get_help(), color=ctx.color)
                ctx.exit(0)
            return rv

        self.callback = help_without_subcommand

    #: Other names people type for a subcommand (pueue's `remove`, docker's `ls`): taken, not listed in the help.
    ALIASES = {"remove": "rm", "delete": "rm", "ls": "list"}

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and self.ALIASES.get(name) in self.commands:
            command = super().get_command(ctx, self.ALIASES[name])
        return command


class LazyGroup(HelpGroup):
    """A HelpGroup whose commands of `table` are imported when one runs or shows its own help: each command's
    module imports what it runs at its top, and only that command pays for it.

    `table`: each command's name -> (where it is defined, "module:attr"; its short help, the first sentence of
    its help). The group's help lists the commands by the table's short help, importing none (the pattern of
    Click's documentation, "Lazily Loading Subcommands", with the listing added); tests/unit/test_cli.py holds
    the table's short help equal to each command's own.
    """

    def __init__(self, *args, table: Mapping[str, tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.table = table
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.table})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.table:
            where, short_help = self.table[name]
            if self._listing:  # a stand-in with the table's short help, dropped once listed
                return click.Command(name, help=short_help)
            module, attr = where.split(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)  # seam: the command table
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's listing of the commands (its layout and truncation), those not imported by their stand-ins."""
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def load_all(self) -> None:
        """Import every command, and those of its groups (for tools that walk `commands`, such as click-man)."""
        for name in self.table:
            command = self.get_command(None, name)
            if isinstance(command, LazyGroup):
                command.load_all()


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")
#: A waiting command's --quiet: no line for each failed attempt (the lines of jobs that did not complete stay).
quiet_option = click.option("--quiet", "-q", is_flag=True,
                            help="While waiting, print no line for each failed attempt.")


#: Passes the context object, a queuectl.api.database.Database (the database named, opened on first use).
pass_app = click.make_pass_decorator(Database)


def print_json(value) -> None:
    """Print `value` as JSON on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def print_table(headers: list[str], rows: list[list]) -> None:
    """Print rows as left-aligned columns under `headers`."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def note_truncation(shown: int, total: int) -> None:
    """Say on stderr when --limit cut a listing short: `shown` of `total` jobs."""
    if total > shown:
        click.echo(f"({shown} of {total} jobs shown; use --limit for more)", err=True)


def note(line: str) -> None:
    """Print a note of a command (not an error) as one line on stderr: `queuectl: LINE`."""
    click.echo(f"queuectl: {line}", err=True)


def patience():
    """The queuectl.api.outage.Patience of a waiting command, its lines on stderr (`note`).

    Raises InvalidConfig (exit 78) for a bad QUEUECTL_OUTAGE_LIMIT: call it before the command
    changes anything."""
    return Patience(note)


def outage_doc(command):
    """Put the outage limit (queuectl.api.outage.LIMIT, its one home) in place of OUTAGE_LIMIT in the
    docstring of a waiting command; goes under @click.command, which reads the docstring as its help."""
    command.__doc__ = command.__doc__.replace("OUTAGE_LIMIT", limit_text())
    return command


class Seconds(click.ParamType):
    """A time of at least 0: a number of seconds (2.5) or a duration (90s, 10m, 1h, 1d, 2w), as settings take.

    The rule is settings.parse_duration's; "forever", nan, inf and negatives are refused (exit 2).
    """

    name = "seconds"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(value, "a time", forever=False)
        except InvalidInput as e:
            self.fail(str(e), param, ctx)
        if seconds is None:
            self.fail(f"a time must be a number of seconds or a duration such as 90s, 12h or 7d, got {value!r}",
                      param, ctx)
        return seconds


#: The most jobs a list shows (--limit), and the most slots of one worker (--count: each job holds
#: three descriptors, and a worker beyond this many is better as several).
MOST_LISTED = 1_000_000_000
MOST_SLOTS = 1000
