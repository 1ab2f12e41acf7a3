"""`queuectl schedule`: recurring jobs, fired by the running workers once per slot."""

from __future__ import annotations

import click

from queuectl.api import schedules as api
from queuectl.cli.common import HelpGroup, json_option, note, pass_app, print_json, print_table
from queuectl.domain.errors import NotFound
from queuectl.domain.models import one_line
from queuectl.domain.recurrence import Rule


@click.group(cls=HelpGroup)
def schedule():
    """Recurring jobs: a job template enqueued at each slot of a cron expression or an interval.

    Any running worker fires a due slot, on any host; each slot is fired once however many
    workers run. A slot whose previous run has not ended is skipped (unless --overlap allow);
    slots that passed while no worker ran give one catch-up run.

    \b
    Examples:
      queuectl schedule add nightly --cron '30 2 * * *' --tz Europe/Berlin '{"command":"backup.sh"}'
      queuectl schedule add tick --every 5m '{"command":"poll.sh","queue":"poll","timeout":60}'
      queuectl schedule list
      queuectl schedule pause nightly
    """


@schedule.command()
@click.argument("name")
@click.argument("template", metavar="JSON")
@click.option("--cron", metavar="EXPR", help="Five cron fields (minute hour day-of-month month day-of-week),"
                                             " or @hourly, @daily, @weekly, @monthly, @yearly.")
@click.option("--every", metavar="DURATION", help="An interval: 30s, 5m, 1h, 1d (slots are its multiples since"
                                                  " 1970-01-01 UTC).")
@click.option("--tz", "zone", metavar="ZONE", help="The time zone of the cron fields (an IANA name such as"
                                                    " Europe/Berlin) [default: with --replace the schedule's,"
                                                    " else this host's].")
@click.option("--overlap", type=click.Choice(["skip", "allow"]), default="skip", show_default=True,
              help="skip: a slot adds nothing while the previous run has not ended; allow: runs side by side.")
@click.option("--replace", is_flag=True, help="Replace the schedule of that name if there is one.")
@pass_app
def add(app, name, template, cron, every, zone, overlap, replace):
    """Add schedule NAME, which enqueues the job JSON at each slot.

    JSON has the fields of `queuectl enqueue` but id, run_at, delay and after: each run's
    id is NAME@SLOT (the slot in UTC, such as nightly@2026-12-02T01:30:00Z), and it is due
    at once. The schedule's zone is stored with it, so hosts in other zones agree.
    A name that exists is refused (exit 1) unless --replace, which keeps the schedule's
    zone unless --tz is given, its pause, its last run and its skipped count.

    \b
    Examples:
      queuectl schedule add nightly --cron '30 2 * * *' '{"command":"backup.sh"}'
      queuectl schedule add report --cron @daily --tz UTC '{"command":"report.sh","key":"report"}'
      queuectl schedule add tick --every 30s --overlap allow '{"command":"ping -c1 gw"}'
    """
    new = api.draft(name, template, cron, every, zone, overlap)  # bad input: refused before the store is opened
    added = api.add(app.store(), new, replace, warn=lambda line: note(f"warning: {line}"))
    rule = added.rule
    click.echo(f"{added.schedule.name}: {rule.text} ({rule.zone}); next run {rule.local(added.schedule.next_at)}")


@schedule.command(name="list")
@json_option
@pass_app
def list_(app, as_json):
    """List the schedules: rule, zone, next run, last run and its job's state.

    \b
    Example:
      queuectl schedule list --json
    """
    schedules = api.list_schedules(app.store())
    if as_json:
        print_json([api.to_dict(s) for s in schedules])
        return
    print_table(["NAME", "RULE", "ZONE", "NEXT RUN", "LAST RUN", "LAST STATE", "SKIPPED", "OVERLAP", "PAUSED",
                 "COMMAND"],
                [[s.name, Rule.of(s).text, s.zone, "paused" if s.paused_at else Rule.of(s).local(s.next_at),
                  s.last_job or "-", s.last_state.value if s.last_state else "-", s.skipped, s.overlap,
                  "yes" if s.paused_at else "-", one_line(s.template["command"], 40)] for s in schedules])


def _each(results, done: str, already: str) -> None:
    """Print a line per (schedule, result); raise NotFound (exit 1) naming the unknown ones, after the others."""
    unknown = [n for n, r in results if r is None]
    for name, result in results:
        if result is not None:
            click.echo(f"{name}: {done if result else already}")
    if unknown:
        raise NotFound(f"no schedule named {', '.join(unknown)}")


@schedule.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@pass_app
def rm(app, names):
    """Remove schedules (the runs they enqueued stay). An unknown name: exit 1, the others are removed.

    \b
    Example:
      queuectl schedule rm nightly
    """
    _each(api.remove(app.store(), names), "removed", "")


@schedule.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@pass_app
def pause(app, names):
    """Stop firing schedules until `schedule resume` (kept in the database).

    \b
    Example:
      queuectl schedule pause nightly
    """
    _set_paused(app, names, True)


@schedule.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@pass_app
def resume(app, names):
    """Fire paused schedules again, from their next slot (the slots passed while paused give no run).

    \b
    Example:
      queuectl schedule resume nightly
    """
    _set_paused(app, names, False)


def _set_paused(app, names, paused: bool) -> None:
    _each(api.set_paused(app.store(), names, paused), *(
        ("paused", "already paused") if paused else ("resumed", "not paused")))

