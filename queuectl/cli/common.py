"""What every command shares: the context object (the database), --json, table printing, notes on stderr."""

from __future__ import annotations

import json

import click

from queuectl.api.database import Database
from queuectl.domain.errors import InvalidInput


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
    from queuectl.api.outage import Patience

    return Patience(note)


def outage_doc(command):
    """Put the outage limit (queuectl.api.outage.LIMIT, its one home) in place of OUTAGE_LIMIT in the
    docstring of a waiting command; goes under @click.command, which reads the docstring as its help."""
    from queuectl.api.outage import limit_text

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
        from queuectl.domain.settings import parse_duration

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
