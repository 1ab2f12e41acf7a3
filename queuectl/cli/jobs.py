"""Commands about jobs: enqueue, list, show, logs, status."""

from __future__ import annotations

import sys
import time

import click

from queuectl.api import jobs as api
from queuectl.cli.common import (MOST_LISTED, Seconds, json_option, note, note_truncation, outage_doc, pass_app,
                                 patience, print_json, print_table)
from queuectl.errors import InvalidInput
from queuectl.models import JobState, iso, one_line

STATE_CHOICE = click.Choice([s.value for s in JobState])


@click.command()
@click.argument("job", required=False, metavar="JSON")
@click.option("--file", "-f", "file", type=click.File("rb"), metavar="FILE",
              help="Read one JSON job per line from FILE ('-' for stdin); all or none are enqueued.")
@click.option("--wait", "wait_", is_flag=True,
              help="Then wait until the job has ended, and exit as its command did (0 when it completed).")
@click.option("--follow", is_flag=True,
              help="Then print its output as it is written (as `logs -f`), and exit as --wait does.")
@pass_app
@outage_doc
def enqueue(app, job, file, wait_, follow):
    """Add a job to the queue and print its id.

    JSON is an object with `command` (required) and optionally `id`, `queue`, `priority`
    (higher runs first), `max_retries`, `run_at` (ISO-8601 with offset) or `delay`
    (seconds), `timeout` (seconds), `cwd` (absolute path), `key`: while a job with
    the same key has not ended, nothing is added and that job's id is printed; and
    `after`, a job id or a list of them: the job is blocked until they have completed,
    and cancelled if one ends dead or cancelled (at once, if one already has).

    \b
    Examples:
      queuectl enqueue '{"id":"job1","command":"sleep 2"}'
      queuectl enqueue '{"command":"make -C /srv/site","queue":"build","timeout":600}'
      queuectl enqueue '{"command":"/usr/local/bin/backup","key":"nightly-backup"}'
      queuectl enqueue '{"id":"test","command":"make test","after":"build"}'
      queuectl enqueue --file jobs.jsonl
      queuectl enqueue --wait '{"command":"make -C /srv/site"}' && ./deploy
      queuectl enqueue --follow '{"command":"make -C /srv/site"}'

    With --wait it exits 0 when the job completed; when it ended otherwise, with its
    last attempt's exit code if it had one, 124 if that attempt timed out, else 1
    (cancelled, could not start). With --file: the first job, in file order, that did
    not complete decides. --follow prints the job's output as it runs (as `logs -f`)
    and exits as --wait does. Ctrl+C stops the waiting only: the jobs go on. The waiting
    rides out an outage of the database (a line on stderr says so) for up to OUTAGE_LIMIT,
    then exits 1; the enqueue itself does not wait for it.
    """
    if (job is None) == (file is None):
        raise InvalidInput("give one JSON job or --file FILE")
    if follow and (file is not None or wait_):
        raise InvalidInput("--follow follows one job: give one JSON job, without --file or --wait")
    # Validation only: the store sets each relative job's run_at from its own clock (store.now()).
    checked_at = time.time()
    waiting = patience() if wait_ or follow else None  # its setting checked before anything is enqueued
    if file is None:
        jobs, lines = [api.parse_one(job, checked_at)], None
    else:
        jobs, lines = api.parse_jobs(file, checked_at)
    store = app.store()
    done = api.enqueue(store, jobs, lines)
    for index, (job, result) in enumerate(zip(jobs, done)):
        where = "" if lines is None else f"line {lines[index]}: "
        if result.held is not None:
            click.echo(f"{where}key {job.key!r} is held by job {result.id} ({result.held.value}); nothing added",
                       err=True)
        elif result.cancelled is not None:
            click.echo(f"{where}job {job.id} is cancelled at once: {result.cancelled}", err=True)
    if follow:
        return _follow(store, done[0].id, waiting, wait_style=False, print_id=True)
    if not wait_:
        click.echo("\n".join(e.id for e in done))
        return None
    return _wait_for_enqueued(store, [e.id for e in done], waiting)


def _follow(store, job_id: str, waiting, wait_style: bool, print_id: bool = False) -> int:
    """Follow job `job_id`'s output (queuectl.api.following) until it ends, after printing its id (`print_id`),
    riding out outages with `waiting` (a queuectl.api.outage.Patience); return the exit status: as `wait`
    gives it (`wait_style`: 0 or 1, with a line for a job that did not complete), else as `enqueue --wait`
    does. Ctrl+C stops the following only (130)."""
    from queuectl.api.waiting import exit_status

    try:
        if print_id:
            click.echo(job_id)  # first (flushed), for a script that reads it while the job runs
        sys.stdout.flush()
        job = api.follow(store, job_id, sys.stdout.buffer, sys.stderr.buffer, note, waiting)
    except KeyboardInterrupt:
        click.echo(f"queuectl: stopped following; the job goes on: queuectl logs -f {job_id}", err=True)
        return 130
    if not wait_style:
        return exit_status(job)
    if job.state != JobState.COMPLETED:
        click.echo(_not_completed(job), err=True)
        return 1
    return 0


def _not_completed(job) -> str:
    """The line `wait` prints for a job that ended without completing."""
    return f"job {job.id} {job.state.value}: {job.last_error or 'no error recorded'}"


def _wait_for_enqueued(store, printed: list[str], waiting) -> int:
    """`enqueue --wait`: print the ids (`printed`: one per job, a key's holder's for a matched one), wait
    for those jobs (riding out outages with `waiting`), and return their exit status (api.wait_status)."""
    try:
        click.echo("\n".join(printed))  # the ids first (flushed), for a script that reads them while the jobs run
        return api.wait_status(store, printed, waiting)
    except KeyboardInterrupt:
        return _stopped_waiting(list(dict.fromkeys(printed)), "the job goes on")


def _stopped_waiting(job_ids: list[str], goes_on: str) -> int:
    """After Ctrl+C while waiting: say how to wait again; return the exit status, 130 (as a shell's)."""
    click.echo(f"queuectl: stopped waiting; {goes_on}: queuectl wait {' '.join(job_ids)}", err=True)
    return 130


@click.command(name="list")
@click.option("--state", type=STATE_CHOICE, help="Only jobs in this state.")
@click.option("--queue", metavar="NAME", help="Only jobs in this queue.")
@click.option("--limit", type=click.IntRange(1, MOST_LISTED), default=100, show_default=True,
              help="At most this many jobs.")
@json_option
@pass_app
def list_(app, state, queue, limit, as_json):
    """List jobs, newest first.

    \b
    Examples:
      queuectl list --state pending
      queuectl list --queue build --limit 20 --json
    """
    if queue is not None:
        from queuectl.jobspec import check_queue

        check_queue(queue)
    store = app.store()
    jobs = store.list_jobs(JobState(state) if state else None, queue, limit)
    if as_json:
        print_json([j.to_dict() for j in jobs])
        return
    print_table(
        ["ID", "STATE", "QUEUE", "PRI", "ATTEMPTS", "CREATED", "COMMAND"],
        [[j.id, j.state.value, j.queue, j.priority, j.attempts, iso(j.created_at), one_line(j.command, 50)]
         for j in jobs],
    )
    note_truncation(store, len(jobs), limit, state, queue)


@click.command()
@click.argument("job_id", metavar="ID")
@json_option
@pass_app
def show(app, job_id, as_json):
    """Show one job's record.

    \b
    Example:
      queuectl show job1
    """
    job = app.store().get_job(job_id)
    d = job.to_dict()
    if as_json:
        print_json(d)
        return
    for key, value in d.items():
        shown = ", ".join(value) if isinstance(value, list) else "" if value is None else value
        click.echo(f"{key + ':':13} {shown}")


@click.command()
@click.argument("job_id", metavar="ID")
@click.option("--follow", "-f", is_flag=True,
              help="Then print its output as it is written, until the job ends; exit as `wait` does.")
@json_option
@pass_app
@outage_doc
def logs(app, job_id, follow, as_json):
    """Print the output a job's last run captured: its stdout on stdout, its stderr on stderr.

    The bytes are written as the job wrote them (the last output-limit bytes of each).
    With --follow: what the running attempt has written so far, then its output as it
    comes (within a second), across retries (a line on stderr says when another attempt
    starts), until the job has ended; a pending or blocked job is waited for. Exit 0
    when it completed, 1 when it ended dead or cancelled (a line on stderr says why).
    An outage of the database is ridden out (a line on stderr says so) for up to
    OUTAGE_LIMIT, then it exits 1.

    \b
    Examples:
      queuectl logs job1
      queuectl logs -f job1
    """
    if follow:
        if as_json:
            raise InvalidInput("--follow prints the output as it comes; it has no --json")
        waiting = patience()
        return _follow(app.store(), job_id, waiting, wait_style=True)
    job = app.store().get_job(job_id, output=True)
    if as_json:
        d = job.to_dict(output=True)
        print_json({k: d[k] for k in ("id", "state", "exit_code", "stdout", "stderr")})
        return
    for stream, data in ((sys.stdout, job.stdout), (sys.stderr, job.stderr)):
        stream.flush()
        stream.buffer.write(data or b"")
        stream.buffer.flush()


@click.command()
@json_option
@pass_app
def status(app, as_json):
    """Show job counts by state and queue (with their limits), the schedules, the keys held, and the workers.

    \b
    Example:
      queuectl status --json
    """
    from queuectl.api.status import status as read_status
    from queuectl.settings import format_duration

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
                    [[sch.name, sch.rule.text, "paused" if sch.paused_at else sch.rule.local(sch.next_at),
                      sch.last_job or "-", sch.last_state.value if sch.last_state else "-", sch.skipped]
                     for sch in snap.schedules])
    if keys:
        click.echo(f"\nKeys held ({keys_held})")
        print_table(["KEY", "JOB", "STATE"], [[k, job_id, state.value] for k, job_id, state in keys])
        if keys_held > len(keys):
            click.echo(f"... and {keys_held - len(keys)} more")
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
    if unit_states:
        click.echo(f"\nUnits ({len(unit_states)})")
        print_table(["UNIT", "ACTIVE", "SUB", "RESTARTS", "STATUS"],
                    [[u["Id"], u.get("ActiveState"), u.get("SubState"), u.get("NRestarts"), u.get("StatusText")]
                     for u in unit_states])


@click.command()
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--timeout", type=Seconds(), default=None, metavar="SECONDS",
              help="Give up after this many seconds (exit 124, as timeout(1)).")
@json_option
@pass_app
@outage_doc
def wait(app, job_ids, timeout, as_json):
    """Wait until every job named has ended: completed, dead or cancelled.

    Exit 0 when all completed; 1 when any ended dead or cancelled (a line each on
    stderr, with its last error) or an id names no job (nothing is waited for then);
    124 when --timeout passes first; 130 on Ctrl+C. It notices an end within 0.1 s of its record,
    from any host on PostgreSQL. An outage of the database is ridden out (a line on stderr
    says so) for up to OUTAGE_LIMIT or until --timeout, then it exits 1.

    \b
    Examples:
      queuectl wait job1
      queuectl wait build test --timeout 600 && ./deploy
      queuectl wait job1 --json
    """
    job_ids = list(dict.fromkeys(job_ids))  # each once, in the order given
    waiting = patience()
    try:
        return _wait(app.store(), job_ids, waiting, timeout, as_json)
    except KeyboardInterrupt:
        return _stopped_waiting(job_ids, "the jobs go on")


def _wait(store, job_ids: list[str], waiting, timeout: float | None, as_json: bool) -> int:
    """`wait`'s work (see it), once the store is open, riding out outages with `waiting`; returns the exit code."""
    from queuectl.api.waiting import EXIT_TIMEOUT

    waited = api.wait(store, job_ids, waiting, timeout)
    for job_id in waited.unknown:
        click.echo(f"queuectl: error: no job with id {job_id!r}", err=True)
    if waited.unknown:
        return 1
    if as_json:
        print_json([{"id": j.id, "state": j.state.value, "exit_code": j.exit_code, "attempts": j.attempts}
                    for j in waited.jobs.values()])
    if waited.late:
        click.echo(f"queuectl: timed out after {timeout:g} s waiting for {', '.join(waited.late)}", err=True)
        return EXIT_TIMEOUT
    for j in waited.failed:
        click.echo(_not_completed(j), err=True)
    return 1 if waited.failed else 0
