"""`queuectl history`: what the workers did, per minute or hour, from the history the store keeps."""

from __future__ import annotations

import time

import click

from queuectl.api.history import history as read_history
from queuectl.cli.common import Seconds, json_option, pass_app, print_json, print_table
from queuectl.domain.models import iso
from queuectl.domain.settings import format_duration

#: --step's choices, in seconds.
STEPS = {"1m": 60.0, "1h": 3600.0}


def human_seconds(seconds: float | None) -> str:
    """Return a time in seconds as people read it: 4ms, 2.5s, 3.2m, 1.5h; "-" for None (no sample)."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


@click.command()
@click.option("--queue", "-q", metavar="QUEUE", help="Only this queue's activity.")
@click.option("--since", type=Seconds(), default="1h", show_default=True,
              help="How far back: seconds or a duration (90s, 15m, 12h, 7d).")
@click.option("--step", type=click.Choice(list(STEPS)), default="1m", show_default=True,
              help="Sum the activity per minute or per hour.")
@click.option("--all-queues", "summed", is_flag=True, help="Sum every queue into one row per step.")
@json_option
@pass_app
def history(app, queue, since, step, summed, as_json):
    """Show what the workers did: per queue and minute (or hour), the jobs that started, completed,
    failed (a retry scheduled), went dead, were cancelled and were recovered from lost workers, with the
    50th and 95th percentiles of their wait (due to start) and run (start to end) times.

    Columns: START, DONE (completed), FAIL (a retry scheduled), DEAD, CANCEL, RECOV (recovered), and
    the percentiles (WAIT50, WAIT95, RUN50, RUN95). Times are local. Steps with no activity are left
    out. The history is kept for keep-history (`queuectl config`).

    \b
    Examples:
      queuectl history --since 15m
      queuectl history --queue mail --since 2d --step 1h --json
    """
    rows = read_history(app.store(), queue=queue, since=since, step=STEPS[step], by_queue=not summed)
    if as_json:
        print_json([{**r._asdict(), "at": iso(r.at)} for r in rows])
        return
    if not rows:
        click.echo(f"no activity in the last {format_duration(since)}")
        return
    when = "%Y-%m-%d %H:%M"
    print_table(["TIME", "QUEUE", "START", "DONE", "FAIL", "DEAD", "CANCEL", "RECOV", "WAIT50", "WAIT95", "RUN50",
                 "RUN95"],
                [[time.strftime(when, time.localtime(r.at)), r.queue or "(all)", r.started, r.completed, r.failed,
                  r.dead, r.cancelled, r.recovered, *map(human_seconds, (r.wait_p50, r.wait_p95, r.run_p50,
                                                                          r.run_p95))] for r in rows])
