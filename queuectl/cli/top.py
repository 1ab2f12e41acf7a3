"""`queuectl top`: the live view in the terminal (queuectl.tui); this module only checks, opens and reports."""

from __future__ import annotations

import locale
import sys

import click

from queuectl.cli.common import Seconds, pass_app
from queuectl.domain.errors import InvalidInput, PermissionDenied, QueuectlError
from queuectl.domain.models import printable
from queuectl.tui import app as screen
from queuectl.tui.model import View
from queuectl.tui.source import Source

#: The shortest and longest --interval, seconds: shorter would cost the workers for nothing a person sees.
INTERVAL_RANGE = (0.2, 3600.0)


def _interval(ctx, param, value: float) -> float:
    low, high = INTERVAL_RANGE
    if not low <= value <= high:
        raise click.BadParameter(f"must be from {low:g}s to {high / 60:g}m, got {value:g}s", ctx, param)
    return value


@click.command()
@click.option("--interval", type=Seconds(), default=2.0, show_default="2s", callback=_interval,
              help="Time between two readings: seconds or a duration (1.5, 5s, 1m).")
@click.option("--read-only", is_flag=True, help="Show the view without its actions (pause, cancel, retry).")
@pass_app
def top(app, interval, read_only):
    """Watch the queue live in the terminal: jobs by state and queue, throughput, workers, running jobs,
    schedules and the dead letter queue; pause, cancel and retry by key (? lists the keys, q quits).

    A user who may read but not write the database gets the view without the actions.

    \b
    Example:
      queuectl top --interval 5s
    """
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise InvalidInput("top draws on a terminal and this is none (stdin or stdout is not a tty);"
                           " for a report use 'queuectl status'")
    try:
        store = app.store()
    except PermissionDenied:  # SQLite: a file this user may read and not write still gets the view, read-only
        if app.is_postgres:
            raise
        store = app.store(read_only=True)
    source = Source(store)
    why = None if read_only else source.can_write()
    view = View(interval, read_only or why is not None, why or "")
    first = source.read()
    view.read_at = first.snapshot.now.wall
    locale.setlocale(locale.LC_ALL, "")
    try:
        screen.run(source, view, first, locale.getpreferredencoding(False))
    except screen.Ended as e:
        _say(f"queuectl: top ended by {e}")
        click.get_current_context().exit(128 + e.signum)
    except (QueuectlError, KeyboardInterrupt):
        raise
    except Exception as e:  # the terminal is back (app.session): say what ended the view in one line

        raise QueuectlError(f"top stopped: {type(e).__name__}: {printable(str(e))}") from None


def _say(line: str) -> None:
    """One line on stderr, if it is still there (after SIGHUP the terminal may be gone)."""
    try:
        click.echo(line, err=True)
    except OSError:
        pass
