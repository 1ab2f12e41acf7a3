"""The dashboard's application without a browser (Flask's test client on a real SQLite file): the headers of
every answer, signing in, the roles, the trusted proxy's header, the URL prefix, and domain errors as
HTTP statuses."""

from __future__ import annotations

import time

import pytest

from conftest import snapshot
from queuectl.models import JobState
from support import worker_steps as steps
from support.webapp import Dashboard, token_in


@pytest.fixture
def dash(db, tmp_path):
    d = Dashboard(db, tmp_path)
    yield d
    d.close()


@pytest.fixture
def dead(store) -> str:
    """A dead job's id, "d1" (its one attempt failed, through a worker's steps)."""
    now = time.time()
    steps.add(store, now, id="d1", command="exit 3", max_retries=0)
    worker = steps.register(store, now=now)
    [job] = steps.claim(store, worker, [], 1, now)
    assert steps.finish(store, worker, [steps.bad(job.id, 3)], now) == [JobState.DEAD]
    return job.id


def test_an_operator_s_pages_have_the_action_forms(dash, dead, run_cli):
    assert run_cli("schedule", "add", "tick", "--every", "1h", '{"command": "true"}').exit_code == 0
    for path, action in ((f"/jobs/{dead}", f"/jobs/{dead}/retry"), ("/queues", "/queues/default/pause"),
                         ("/schedules", "/schedules/tick/pause")):
        page = dash.get(path, "olga")
        assert page.status_code == 200
        assert f'action="{action}"'.encode() in page.data, path
        assert token_in(page.data)
        assert b'<form method="post"' not in dash.get(path, "victor").data  # a viewer is shown none


def test_the_role_gate_refuses_a_viewer_s_post_and_changes_nothing(dash, dead, db):
    token = token_in(dash.get(f"/jobs/{dead}", "olga").data)
    before = snapshot(db)
    for form in ({"csrf": token}, {}):
        r = dash.post(f"/jobs/{dead}/retry", "victor", data=form)
        assert r.status_code == 403 and b"your role may only look" in r.data
    assert snapshot(db) == before
    r = dash.post(f"/jobs/{dead}/retry", "olga", data={"csrf": token})
    assert r.status_code == 303 and r.headers["Location"].startswith(f"/jobs/{dead}?said=")
    assert snapshot(db) != before


def test_read_only_refuses_an_operator_s_post(db, tmp_path, dead):
    d = Dashboard(db, tmp_path, read_only=True)
    try:
        page = d.get(f"/jobs/{dead}", "olga")
        assert b'<form method="post"' not in page.data and b"read-only" in page.data
        before = snapshot(db)
        r = d.post(f"/jobs/{dead}/retry", "olga", data={"csrf": "x"})
        assert r.status_code == 403 and b"this dashboard is read-only" in r.data
        assert snapshot(db) == before
    finally:
        d.close()


def test_a_get_to_an_action_is_405_and_changes_nothing(dash, dead, db):
    before = snapshot(db)
    for path in (f"/jobs/{dead}/retry", f"/jobs/{dead}/cancel", "/queues/default/pause", "/queues/default/resume",
                 "/schedules/tick/pause", "/schedules/tick/resume"):
        r = dash.get(path, "olga")
        assert r.status_code == 405 and b"changes are POSTs" in r.data, path
    assert snapshot(db) == before
