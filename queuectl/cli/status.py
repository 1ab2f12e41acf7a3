"""`queuectl status`: job counts by state and queue, limits, schedules, held keys, workers and units; and
`queuectl metrics`, the same reading in the Prometheus text format (both queuectl.api.status)."""

from __future__ import annotations

import click

from queuectl.api.status import metrics as read_metrics, status as read_status, write_metrics
from queuectl.cli.common import json_option, pass_app, print_json, print_table
from queuectl.domain.models import JobState
from queuectl.domain.recurrence import Rule
from queuectl.domain.settings import format_duration


@click.command()
@json_option
@pass_app
def status(app, as_json):
    """Show job counts by state and queue (with their limits), the schedules, the keys held, and the workers.

    \b
    Example:
      queuectl status --json
    """
    report = read_status(app.store())
    if as_json:
        print_json(report.to_dict())
        return
    snap, keys, keys_held, unit_states = report.snapshot, report.keys, report.keys_held, report.units
    counts, paused, oldest = snap.counts, snap.paused, snap.oldest_ready
    click.echo("Jobs")
    print_table(["STATE", "COUNT"], [[s, n] for s, n in snap.totals.items()])
    limits = snap.limits
    if len(counts) > 1 or paused or oldest or limits:
        click.echo("\nQueues")
        names = sorted({*counts, *paused, *limits})
        zero = dict.fromkeys((s.value for s in JobState), 0)
        print_table(["QUEUE", *[s.value.upper() for s in JobState], "OLDEST READY", "PAUSED", "LIMIT"],
                    [[q, *counts.get(q, zero).values(), f"{oldest[q]:.1f}s" if q in oldest else "-",
                      "yes" if q in paused else "-", limits[q].text if q in limits else "-"] for q in names])
    if snap.schedules:
        click.echo(f"\nSchedules ({len(snap.schedules)})")
        print_table(["NAME", "RULE", "NEXT RUN", "LAST RUN", "LAST STATE", "SKIPPED"],
                    [[sch.name, Rule.of(sch).text, "paused" if sch.paused_at else Rule.of(sch).local(sch.next_at),
                      sch.last_job or "-", sch.last_state.value if sch.last_state else "-", sch.skipped]
                     for sch in snap.schedules])
    if keys:
        click.echo(f"\nKeys held ({keys_held})")
        print_table(["KEY", "JOB", "STATE"], [[k, job_id, state.value] for k, job_id, state in keys])
        if keys_held > len(keys):
            click.echo(f"... and {keys_held - len(keys)} more")
    click.echo("\nJobs per minute")
    print_table(["", *report.rates], [[what, *(f"{per[what]:g}" for per in report.rates.values())]
                                      for what in ("completed", "failed")])
    kept = ", ".join(f"{state} {format_duration(seconds)}" for state, seconds in snap.retention.items())
    click.echo(f"\nRetention: {kept}")
    click.echo(f"\nWorkers ({len(snap.workers)})")
    if snap.workers:
        rows = []
        for w in snap.workers:
            d = w.info.to_dict(w.heartbeat_age, w.state)
            rows.append([d["name"], d["state"], d["pid"], d["host"], f"{d['busy']}/{d['slots']}",
                         f"{d['heartbeat_age']:.1f}s", ",".join(d["jobs"]) or "-"])
        print_table(["NAME", "STATE", "PID", "HOST", "BUSY", "HEARTBEAT", "JOBS"], rows)
    if report.stopped:
        click.echo(f"\nStopped in the last hour ({len(report.stopped)})")
        print_table(["NAME", "ENDED", "STOPPED", "PID", "HOST", "UNIT"],
                    [[w.name, w.ended, f"{max(report.now - w.stopped_at, 0):.0f}s ago", w.pid, w.host, w.unit or "-"]
                     for w in report.stopped])
    if unit_states:
        click.echo(f"\nUnits ({len(unit_states)})")
        print_table(["UNIT", "ACTIVE", "SUB", "RESTARTS", "STATUS"],
                    [[u["Id"], u.get("ActiveState"), u.get("SubState"), u.get("NRestarts"), u.get("StatusText")]
                     for u in unit_states])


@click.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write to FILE atomically (a temporary file renamed over it, mode 0644) instead of stdout;"
                   " for node_exporter's textfile collector.")
@pass_app
def metrics(app, output):
    """Print the queue's metrics in the Prometheus text format.

    Jobs by queue and state, the oldest ready job's age per queue, paused queues, queue
    limits, workers by state with busy and total slots, counters of ended runs by outcome,
    and each schedule's last fire, next run and skipped slots.

    \b
    Examples:
      queuectl metrics
      queuectl metrics --output /var/lib/prometheus/node-exporter/queuectl.prom
    """
    store = app.store()
    if output is None:
        click.echo(read_metrics(store), nl=False)
    else:
        write_metrics(store, output)
