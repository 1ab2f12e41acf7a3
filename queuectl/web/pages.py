"""The dashboard's pages (GET only: none changes anything), each at a stable address under the URL prefix:

    /                   the overview (its live part alone: /?part=live, which the page reloads itself)
    /jobs               jobs, filtered by query parameters (?state=dead&queue=build)
    /bulk               the confirmation of a bulk action on what a filter matches (operators)
    /jobs/ID            one job: every field, its dependencies, its output (following live: /jobs/ID/output.json)
    /queues             the queues: jobs by state, pause, limit, oldest wait
    /workers            the workers: host, slots busy of total, heartbeat age, unit and its state
    /schedules          the schedules and their next runs

Every read goes through the shared Connections (queuectl.web.reads) and queuectl.api.
"""

from __future__ import annotations

from flask import current_app, g, redirect, render_template, request, url_for

from queuectl.domain.errors import InvalidInput, PermissionDenied
from queuectl.api.following import output_since
from queuectl.api.jobs import attempts, dependencies, exists, list_jobs
from queuectl.api.ops import bulk_filter
from queuectl.api.search import job_filter, search as find
from queuectl.domain.models import JobState
from queuectl.web.charts import SPANS, throughput

#: The dead letter queue's newest entries and the running jobs the overview shows, at most.
DEAD_SHOWN, RUNNING_SHOWN = 10, 20
#: Jobs a page of /jobs shows.
PAGE = 50


def connections():
    return current_app.extensions["queuectl"]


def register(app) -> None:
    """Add the pages to `app`."""
    app.add_url_rule("/", "overview", overview)
    app.add_url_rule("/jobs", "jobs", jobs)
    app.add_url_rule("/bulk", "bulk", bulk)
    app.add_url_rule("/jobs/<job_id>/output.json", "output", output)
    app.add_url_rule("/jobs/<job_id>", "job", job)
    app.add_url_rule("/queues", "queues", queues)
    app.add_url_rule("/workers", "workers", workers)
    app.add_url_rule("/schedules", "schedules", schedules)


def overview():
    conns = connections()
    snap = conns.snapshot()
    windows = [(name, span, step, *conns.window(span, step)) for name, span, step in SPANS]
    # What the charts are drawn from (the spans' rows, and the minute: the steps end at now): a tab whose charts
    # are these already gets a placeholder in its live part, not the same SVG again every interval.
    stamp = format(hash((int(snap.now.wall // 60), *((tuple(rows), tuple(spans.items()))
                                                       for _, _, _, rows, spans in windows))) & 0xFFFFFFFF, "08x")
    live = request.args.get("part") == "live"
    charts = None if live and request.args.get("charts") == stamp else [
        throughput(name, rows, list(spans.values()), snap.now.wall, span, step)
        for name, span, step, rows, spans in windows]
    # Read with the snapshot, as often: what every tab's refresh shows (queuectl.web.reads).
    dead = conns.kept(("dead",), lambda store: list_jobs(store, "dead", limit=DEAD_SHOWN)[0])
    running = conns.kept(("running",), lambda store: list_jobs(store, "processing", limit=RUNNING_SHOWN)[0])
    template = "overview_live.html" if live else "overview.html"
    return render_template(template, snap=snap, charts=charts, stamp=stamp, dead=dead, running=running,
                           units=conns.units(snap))


#: The filters of /jobs, each a query parameter of the same name (queuectl.api.search's fields).
FILTERS = ("state", "queue", "key", "after", "text", "id")


def filters(args) -> dict[str, str]:
    """Return the filters given in `args` (a request's query or form), empty ones left out."""
    return {name: args.get(name, "").strip() for name in FILTERS if args.get(name, "").strip()}


def api_fields(chosen: dict[str, str]) -> dict[str, str]:
    """Return the filters of /jobs as queuectl.api.search's arguments (`id` there is `id_prefix`)."""
    return {("id_prefix" if k == "id" else k): v for k, v in chosen.items()}


def search(store, chosen: dict[str, str], before: int | None = None, limit: int | None = None):
    """Return queuectl.api.search.search's page (of `limit` jobs, default PAGE) for the filters of /jobs."""
    return find(store, before=before, limit=limit or PAGE, **api_fields(chosen))


def jobs():
    chosen = filters(request.args)
    try:
        before = int(request.args["before"]) if request.args.get("before") else None
    except ValueError:
        raise InvalidInput("before is a whole number (the page's last job's seq)") from None
    conns = connections()
    if set(chosen) == {"id"} and before is None:  # search by id: straight to the job when there is one
        if conns.read(lambda store: exists(store, chosen["id"])):
            return redirect(url_for("job", job_id=chosen["id"]))
    page = conns.read(lambda store: search(store, chosen, before))
    return render_template("jobs.html", page=page, chosen=chosen, before=before,
                           states=[s.value for s in JobState])


#: The actions /bulk confirms, for everything a filter matches.
BULK = ("cancel", "retry")


def bulk_action(value: str | None) -> str:
    """Return `value` if it names a bulk action (BULK); raises InvalidInput."""
    if value not in BULK:
        raise InvalidInput(f"a bulk action is {' or '.join(BULK)}, got {value!r}")
    return value


def bulk():
    """The confirmation of a bulk action, with how many jobs match now (an operator's page: it changes nothing)."""
    if not g.may_act:
        raise PermissionDenied("refused: your role may only look")

    action = bulk_action(request.args.get("action"))
    chosen = filters(request.args)
    bulk_filter(job_filter(**api_fields(chosen)))  # the action's own check: a filter, and valid (InvalidInput)
    page = connections().read(lambda store: search(store, chosen, limit=1))
    return render_template("bulk.html", action=action, chosen=chosen, total=page.total, capped=page.capped)


def job(job_id: str):
    """A job's page, with its attempts that ended without completing, and its output as kept now (readable without
    script); the page's script follows on from the positions it was read to."""
    # Its attempts read first: the job's record (read with its output, in one statement) is never older than them.
    tried, deps, step = connections().read(lambda store: (
        attempts(store, job_id), dependencies(store, job_id), output_since(store, job_id, None, (0, 0))))
    return render_template("job.html", job=step.job, deps=deps, tried=tried, step=step,
                           out=step.stdout.decode("utf-8", "replace"), err=step.stderr.decode("utf-8", "replace"))


def output(job_id: str):
    """The job's output past the positions the page has shown: JSON for the page's script."""
    try:
        attempt = int(request.args["attempt"]) if request.args.get("attempt") else None
        positions = (int(request.args.get("out", 0)), int(request.args.get("err", 0)))
    except ValueError:
        raise InvalidInput("attempt, out and err are whole numbers") from None
    step = connections().read(lambda store: output_since(store, job_id, attempt, positions))
    return {"state": step.job.state.value, "ended": step.job.state.ended, "attempt": step.attempt,
            "restarted": step.restarted, "stdout": step.stdout.decode("utf-8", "replace"),
            "stderr": step.stderr.decode("utf-8", "replace"), "out": step.positions[0], "err": step.positions[1],
            "lost": step.lost}


def queues():
    return render_template("queues.html", snap=connections().snapshot())


def workers():
    conns = connections()
    snap = conns.snapshot()
    return render_template("workers.html", snap=snap, units=conns.units(snap))


def schedules():
    return render_template("schedules.html", snap=connections().snapshot())

