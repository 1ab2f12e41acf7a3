"""`queuectl limit`: per-queue concurrency and rate limits, kept across every worker and host."""

from __future__ import annotations

import click

from queuectl.api import limits as api
from queuectl.cli.common import json_option, pass_app, print_json, print_table
from queuectl.domain.errors import InvalidInput


@click.command()
@click.argument("queue", required=False)
@click.option("--concurrency", type=int, metavar="N", help="At most N jobs of QUEUE processing at once (N >= 1).")
@click.option("--rate", metavar="COUNT/DURATION", help="At most COUNT jobs of QUEUE started in any window of"
                                                      " DURATION (30/1m, 5/2s).")
@click.option("--clear", is_flag=True, help="Remove QUEUE's limits.")
@json_option
@pass_app
def limit(app, queue, concurrency, rate, clear, as_json):
    """Limit how many jobs of QUEUE run at once, or start per window, across every worker and host.

    Without options it shows QUEUE's limits; without QUEUE, every queue's. Limits are kept
    in the database, like pause. A full limited queue never holds other queues back:
    workers claim from those meanwhile. Jobs already running when a limit is lowered run on.

    \b
    Examples:
      queuectl limit build --concurrency 2
      queuectl limit mail --rate 30/1m
      queuectl limit build --clear
      queuectl limit --json
    """
    changes = concurrency is not None or rate is not None
    if queue is None and (changes or clear):
        raise InvalidInput("give the QUEUE to limit (queuectl limit QUEUE --concurrency N)")
    api.check(concurrency, rate, clear)  # before the store opens (set_limit checks too)
    store = app.store()
    if clear or changes:
        kept = api.set_limit(store, queue, concurrency, rate, clear)
        limits = [kept] if kept.text != "-" else []
        if not as_json:
            click.echo(f"{queue}: {kept.text if limits else 'no limits'}")
            return
    else:
        limits = api.limits(store, queue)
    if as_json:
        print_json([q.to_dict() for q in limits])
        return
    if queue is not None and not limits:
        click.echo(f"{queue}: no limits")
        return
    print_table(["QUEUE", "CONCURRENCY", "RATE", "PROCESSING"],
                [[q.queue, q.concurrency or "-", q.text.partition("rate ")[2] or "-", q.processing] for q in limits])
