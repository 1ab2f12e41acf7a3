"""The dashboard's actions: each a POST (queuectl.web.app checks the role, the CSRF token and the origin
before any reaches here), each one call of queuectl.api on the acting connection, so that its rules are
the CLI's. Each answers with a redirect (303) to the page it came from, saying what happened.

    POST /jobs/ID/retry             retry a dead or cancelled job
    POST /jobs/ID/cancel            cancel a job (a running one's worker is asked to stop it)
    POST /queues/NAME/pause         pause a queue (and /resume)
    POST /schedules/NAME/pause      pause a schedule (and /resume)
    POST /bulk                      cancel or retry everything a filter matches (confirmed at GET /bulk)
"""

from __future__ import annotations

from flask import current_app, redirect, request, url_for
from itsdangerous import BadData, URLSafeSerializer

from queuectl.api import ops
from queuectl.api.ops import cancel_now, retry, said_paused, set_paused
from queuectl.api.schedules import set_paused as set_schedule_paused
from queuectl.api.search import job_filter
from queuectl.domain.errors import Conflict, NotFound
from queuectl.web.pages import api_fields, bulk_action, filters


def register(app) -> None:
    """Add the actions to `app` (POST only)."""
    for rule, endpoint, view in (
            ("/bulk", "bulk_act", bulk_act),
            ("/jobs/<job_id>/retry", "retry_job", retry_job),
            ("/jobs/<job_id>/cancel", "cancel_job", cancel_job),
            ("/queues/<queue>/pause", "pause_queue", lambda queue: queue_paused(queue, True)),
            ("/queues/<queue>/resume", "resume_queue", lambda queue: queue_paused(queue, False)),
            ("/schedules/<name>/pause", "pause_schedule", lambda name: schedule_paused(name, True)),
            ("/schedules/<name>/resume", "resume_schedule", lambda name: schedule_paused(name, False))):
        app.add_url_rule(rule, endpoint, view, methods=["POST"])


def _act(call):
    return current_app.extensions["queuectl"].act(call)


def _back(fallback: str, said: str, **values):
    """Redirect (303) to page `fallback` with `values`, saying `said` there (signed: said_token)."""
    return redirect(url_for(fallback, said=said_token(said), **values), code=303)


def _signer():
    return URLSafeSerializer(current_app.secret_key, salt="said")


def said_token(text: str) -> str:
    """Return `text` signed with the server's key, for the `said` query parameter of a redirect."""
    return _signer().dumps(text)


def said_text(token: str | None) -> str | None:
    """Return the text of a `said` parameter this server signed, else None: a link made elsewhere cannot put
    words on the dashboard's pages (content spoofing)."""
    if not token:
        return None
    try:
        text = _signer().loads(token)
    except BadData:
        return None
    return text if isinstance(text, str) else None


def retry_job(job_id: str):
    [state] = _act(lambda store: retry(store, [job_id]))
    return _back("job", f"job {job_id} retried: now {state.value}", job_id=job_id)


def cancel_job(job_id: str):
    result = _act(lambda store: cancel_now(store, job_id))
    if result.error:
        if result.was is None:
            raise NotFound(result.error)  # as retry's
        raise Conflict(f"job {job_id}: {result.error}")
    return _back("job", f"job {job_id}: {result.description}", job_id=job_id)


def queue_paused(queue: str, paused: bool):
    [(_, changed)] = _act(lambda store: set_paused(store, [queue], paused))
    return _back("queues", said_paused("queue", queue, paused, changed))


def schedule_paused(name: str, paused: bool):
    [(_, changed)] = _act(lambda store: set_schedule_paused(store, [name], paused))
    if changed is None:
        raise NotFound(f"no schedule {name}")
    return _back("schedules", said_paused("schedule", name, paused, changed))


def bulk_act():
    """Cancel or retry every job the form's filters match, in batches (queuectl.api.ops)."""
    action = bulk_action(request.form.get("action"))
    chosen = filters(request.form)
    act = ops.cancel_matching if action == "cancel" else ops.retry_matching
    done = _act(lambda store: act(store, job_filter(**api_fields(chosen))))
    said = (f"{'cancelled' if action == 'cancel' else 'retried'} {done.changed} of {done.matched} matching"
            f" job{'' if done.matched == 1 else 's'}" + (f", {done.requested} running asked to stop" if done.requested else "")
            + (f"; {done.skipped} left as they were" if done.skipped else ""))
    return _back("jobs", said, **chosen)
