"""What every command shares: the database option's resolution, --json, and table printing."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import click

from queuectl import conffile
from queuectl.conffile import SiteConfig
from queuectl.errors import InvalidConfig, InvalidInput, PermissionDenied
from queuectl.store import Store, default_db_path, is_uri, open_store
from queuectl.wake import wake_local_workers


class HelpGroup(click.Group):
    """A command group that, run without a subcommand, prints its help on stdout and exits 0.

    As git and systemctl do, and as Click 8.1 did by default; Click 8.2's `no_args_is_help`
    prints the help as an error (stderr, exit 2) instead. The group's own callback runs
    first, so its options are still checked.
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


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")


@dataclass
class App:
    """The context object: the database (a SQLite path or a PostgreSQL URI), where it came from, and the store.

    The database is --db, else QUEUECTL_DB, else `db` in /etc/queuectl/queuectl.conf, else
    the XDG default (a worker's may differ: `for_worker`). One that cannot be used is bad input when given as an option (exit 2)
    but a configuration error when it came from the environment (a unit's environment
    file) or the configuration file (exit 78).
    """

    db: str | None
    db_source: str = "option"
    _site: SiteConfig | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)

    def site(self) -> SiteConfig:
        """The site configuration file's contents (read once; raises InvalidConfig)."""
        if self._site is None:
            self._site = conffile.load()
        return self._site

    def db_path(self) -> str:
        """Return the database in force: a SQLite path or a PostgreSQL URI."""
        if self.db:
            return self.db
        site = self.site()
        if site.db:
            self.db_source = "config"
            return site.db
        self.db_source = "default"
        return default_db_path()

    def for_worker(self) -> None:
        """Make the database in force the one a worker uses, which may differ from the commands' one.

        Commands may reach PostgreSQL through a pooler in transaction mode (PgBouncer); a
        worker keeps session state (LISTEN, prepared statements) and needs a connection of its
        own. Order: --db on the command line, else QUEUECTL_WORKER_DB, else QUEUECTL_DB, else
        `worker-db` in the configuration file, else its `db`, else the XDG default: the
        environment before the file, and at each level the workers' own value first.
        An empty QUEUECTL_WORKER_DB counts as unset, as an empty QUEUECTL_DB does (Click's rule).
        """
        if self.db_source == "option" and self.db:
            return
        env = os.environ.get("QUEUECTL_WORKER_DB")
        if env:
            self.db, self.db_source = env, "worker environment"
        elif not self.db and self.site().worker_db:
            self.db, self.db_source = self.site().worker_db, "config"

    def store(self, durable: bool = True, session: bool = False) -> Store:
        """Open the database (creating it, and the default directory, on first use); `session`: see open_store."""
        if self._store is None:
            path = self.db_path()
            if self.db_source == "default":
                os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                self._store = open_store(path, durable=durable, defaults=self.site().defaults, session=session,
                                         after_commit=wake_local_workers)
            except PermissionDenied:
                raise
            except InvalidInput as e:
                if self.db_source in ("environment", "worker environment"):
                    var = "QUEUECTL_WORKER_DB" if self.db_source == "worker environment" else "QUEUECTL_DB"
                    raise InvalidConfig(f"{e} (from {var})") from None
                if self.db_source == "config":
                    raise InvalidConfig(f"{e} (from {self.site().path})") from None
                raise
            click.get_current_context().call_on_close(self.close)
        return self._store

    def close(self) -> None:
        """Close the store if it is open."""
        if self._store is not None:
            self._store.close()
            self._store = None


pass_app = click.make_pass_decorator(App)


def print_json(value) -> None:
    """Print `value` as JSON on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def print_table(headers: list[str], rows: list[list]) -> None:
    """Print rows as left-aligned columns under `headers`."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def note_truncation(store: Store, shown: int, limit: int, state: str | None, queue: str | None) -> None:
    """Say on stderr when --limit cut a listing short (counts come from the kept totals: no scan)."""
    if shown < limit:
        return
    total = sum(n for q, per in store.counts().items() if queue in (None, q)
                for s, n in per.items() if state in (None, s))
    if total > shown:
        click.echo(f"({shown} of {total} jobs shown; use --limit for more)", err=True)


def note(line: str) -> None:
    """Print a note of a command (not an error) as one line on stderr: `queuectl: LINE`."""
    click.echo(f"queuectl: {line}", err=True)


def patience():
    """The queuectl.outage.Patience of a waiting command, its lines on stderr (`note`).

    Raises InvalidConfig (exit 78) for a bad QUEUECTL_OUTAGE_LIMIT: call it before the command
    changes anything."""
    from queuectl.outage import Patience

    return Patience(note)


def is_postgres(app: App) -> bool:
    """Return True if the database in force is a PostgreSQL URI."""
    return is_uri(app.db_path())


class Seconds(click.FloatRange):
    """A number of seconds of at least 0 (Click's FloatRange, which lets nan and inf through, less them)."""

    name = "seconds"

    def __init__(self) -> None:
        super().__init__(min=0)

    def convert(self, value, param, ctx):
        import math

        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return seconds


#: The most jobs a list shows (--limit), and the most slots of one worker (--count: each job holds
#: three descriptors, and a worker beyond this many is better as several).
MOST_LISTED = 1_000_000_000
MOST_SLOTS = 1000
