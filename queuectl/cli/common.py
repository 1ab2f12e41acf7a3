"""What every command shares: the database option's resolution, --json, and table printing."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import click

from queuectl.store import SqliteStore, default_db_path

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")


@dataclass
class App:
    """The context object: the --db value, and the store once a command opens it."""

    db: str | None
    _store: SqliteStore | None = field(default=None, repr=False)

    def store(self, durable: bool = True) -> SqliteStore:
        """Open the database (creating it, and the default directory, on first use)."""
        if self._store is None:
            path = self.db
            if not path:
                path = default_db_path()
                os.makedirs(os.path.dirname(path), exist_ok=True)
            self._store = SqliteStore(path, durable=durable)
            click.get_current_context().call_on_close(self._store.close)
        return self._store


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
