"""The dashboard's application without a browser (Flask's test client on a real SQLite file): the headers of
every answer, signing in, the roles, the trusted proxy's header, the URL prefix, and domain errors as
HTTP statuses."""

from __future__ import annotations

import json
import re
import time

from support.engines import snapshot
from queuectl.api.database import Database
from queuectl.domain.errors import PermissionDenied
from queuectl.domain.models import JobState
from queuectl.web import app as app_module
from queuectl.web import security
from support import worker_steps as steps
from support.webapp import Counting, Dashboard, auth, token_in


def test_an_operator_s_pages_have_the_action_forms(dash, dead, run_cli):
    assert run_cli("schedule", "add", "tick", "--every", "1h", '{"command": "true"}').exit_code == 0
    for path, action in ((f"/jobs/{dead}", f"/jobs/{dead}/retry"), ("/queues", "/queues/default/pause"),
                         ("/schedules", "/schedules/tick/pause")):
        page = dash.get(path, "olga")
        assert page.status_code == 200
        assert f'action="{action}"'.encode() in page.data, path
        assert token_in(page.data)
        assert b'<form method="post"' not in dash.get(path, "victor").data  # a viewer is shown none


def test_a_queue_paused_or_limited_before_its_first_job_is_shown_and_can_be_resumed(dash, dead, run_cli):
    assert run_cli("limit", "fetch", "--rate", "30/1m").exit_code == 0
    token = token_in(dash.get("/queues").data)
    r = dash.post("/queues/later/pause", data={"csrf": token})
    assert r.status_code == 303
    page = dash.get("/queues").data
    for queue in (b"default", b"fetch", b"later"):
        assert b'data-queue="' + queue + b'"' in page, queue
    assert b'action="/queues/later/resume"' in page and b"30/1m" in page
    assert b'data-queue="later"' in dash.get("/?part=live").data
    assert dash.post("/queues/later/resume", data={"csrf": token}).status_code == 303
    assert b'data-queue="later"' not in dash.get("/queues").data  # resumed, no jobs: gone again


def test_schedules_show_their_queue_and_next_run_in_their_zone(dash, run_cli):
    assert run_cli("schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Asia/Kolkata",
                   '{"command": "date", "queue": "reports"}').exit_code == 0
    listed = run_cli("schedule", "list", "--json")
    [schedule] = json.loads(listed.output)
    for page in (dash.get("/schedules").data.decode(), dash.get("/?part=live").data.decode()):
        assert "<td>reports</td>" in page or ">reports</a></td>" in page
        assert f">{schedule['next_local']}</time>" in page and "T02:30:00+05:30" in schedule["next_local"]


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


SECURITY = {"Content-Security-Policy": security.CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
            "Referrer-Policy": "same-origin"}


def secured(response) -> bool:
    return all(response.headers.get(name) == value for name, value in SECURITY.items())


def test_every_answer_carries_the_security_headers(db, tmp_path, dead):
    d = Dashboard(db, tmp_path, prefix="/q")
    try:
        token = token_in(d.get(f"/q/jobs/{dead}", "olga").data)
        answers = {
            "page": d.get("/q/", "olga"), "asset": d.get("/q/static/app.js", "olga"), "404": d.get("/q/nowhere"),
            "no job": d.get("/q/jobs/nope"), "401": d.get("/q/", None), "wrong password": d.client.get(
                "/q/", headers=auth("olga", "wrong")), "403": d.post(f"/q/jobs/{dead}/retry", "victor", data={}),
            "405": d.get(f"/q/jobs/{dead}/retry"), "400": d.get(f"/q/jobs/{dead}/output.json?out=x"),
            "303": d.post(f"/q/jobs/{dead}/retry", "olga", data={"csrf": token}),
            "308 of the prefix": d.get("/q"), "404 outside the prefix": d.get("/jobs"),
        }
        statuses = {what: r.status_code for what, r in answers.items()}
        assert statuses == {"page": 200, "asset": 200, "404": 404, "no job": 404, "401": 401, "wrong password": 401,
                            "403": 403, "405": 405, "400": 400, "303": 303, "308 of the prefix": 308,
                            "404 outside the prefix": 404}
        assert [what for what, r in answers.items() if not secured(r)] == []
        assert [what for what, r in answers.items() if what != "asset" and r.headers["Cache-Control"] != "no-store"] \
            == []  # pages hold the queue's data; the stylesheet and script may be kept
        assert "unsafe-inline" not in security.CSP and "frame-ancestors 'none'" in security.CSP
    finally:
        d.close()


def test_without_credentials_the_answer_is_a_basic_challenge(dash):
    for headers in ({}, auth("olga", "wrong"), auth("victor", "olga-secret"), {"Authorization": "Bearer x"},
                    {"Authorization": "Basic !!!"}, auth("mallory", "x")):
        r = dash.client.get("/jobs", headers=headers)
        assert r.status_code == 401, headers
        assert r.headers["WWW-Authenticate"] == 'Basic realm="queuectl", charset="UTF-8"'
        assert b"sign in to see the queue" in r.data
        assert dash.connections.describe().encode() not in r.data and b"None" not in r.data  # no database, no user
    for answer in (dash.client.get("/jobs", headers={"Accept": "application/json"}),
                   dash.client.get("/jobs/x/output.json?attempt=1&out=0&err=0")):
        assert (answer.status_code, answer.get_json()) == (401, {"error": "sign in to see the queue"})
        assert answer.headers["WWW-Authenticate"].startswith("Basic ")
    assert dash.get("/jobs", "victor").status_code == 200


def test_without_a_users_file_everyone_is_an_anonymous_viewer(db, tmp_path, dead):
    d = Dashboard(db, tmp_path, users=None)
    try:
        page = d.get(f"/jobs/{dead}", None)
        assert page.status_code == 200 and b"anonymous (viewer, read-only)" in page.data
        assert b'<form method="post"' not in page.data
        before = snapshot(db)
        assert d.post(f"/jobs/{dead}/retry", None, data={}).status_code == 403
        assert snapshot(db) == before
    finally:
        d.close()


def test_the_user_header_is_trusted_from_loopback_alone(db, tmp_path, dead):
    d = Dashboard(db, tmp_path, user_header="X-Remote-User")
    try:
        page = d.get(f"/jobs/{dead}", None, headers={"X-Remote-User": "olga"})
        assert page.status_code == 200 and b"olga (operator)" in page.data
        token = token_in(page.data)
        r = d.get("/", None, headers={"X-Remote-User": "mallory"})
        assert r.status_code == 403 and b"X-Remote-User names no user of the users file" in r.data
        far = {"REMOTE_ADDR": "192.0.2.7"}
        r = d.client.get("/", headers={"X-Remote-User": "olga"}, environ_base=far)
        assert r.status_code == 401  # from elsewhere the header is anyone's: Basic authentication it is
        before = snapshot(db)
        r = d.client.post(f"/jobs/{dead}/retry", data={"csrf": token}, headers={"X-Remote-User": "olga"},
                          environ_base=far)
        assert r.status_code == 401 and snapshot(db) == before
        r = d.client.get("/", headers={"X-Remote-User": "olga", **auth("victor")}, environ_base=far)
        assert r.status_code == 200 and b"victor (viewer" in r.data
        # A dual-stack socket's IPv4 peer on loopback (::ffff:127.0.0.1) is the proxy's side too.
        r = d.client.get("/", headers={"X-Remote-User": "olga"}, environ_base={"REMOTE_ADDR": "::ffff:127.0.0.1"})
        assert r.status_code == 200 and b"olga (operator)" in r.data
        r = d.client.get("/", headers={"X-Remote-User": "olga"}, environ_base={"REMOTE_ADDR": "::ffff:192.0.2.7"})
        assert r.status_code == 401
    finally:
        d.close()


def test_the_prefix_middleware(db, tmp_path, dead):
    d = Dashboard(db, tmp_path, prefix="/q/p")
    try:
        r = d.get("/q/p")
        assert (r.status_code, r.headers["Location"]) == (308, "/q/p/")
        for outside in ("/", "/jobs", "/q", "/q/", "/q/pp", "/q/pp/", "/static/app.js", f"/jobs/{dead}"):
            r = d.get(outside)
            assert r.status_code == 404 and b"this server answers under /q/p/" in r.data, outside
            assert r.mimetype == "text/plain"
        for outside, accept in (("/jobs.json", "*/*"), ("/jobs", "application/json")):  # JSON, as asked
            r = d.get(outside, headers={"Accept": accept})
            assert (r.status_code, r.json) == (404, {"error": "not found: this server answers under /q/p/"})
        page = d.get(f"/q/p/jobs/{dead}")
        assert page.status_code == 200
        assert b'href="/q/p/static/style.css"' in page.data and b'src="/q/p/static/app.js"' in page.data
        assert f'action="/q/p/jobs/{dead}/retry"'.encode() in page.data
        assert f'data-follow="/q/p/jobs/{dead}/output.json"'.encode() in page.data
        r = d.post(f"/q/p/jobs/{dead}/retry", data={"csrf": token_in(page.data)})
        assert (r.status_code, r.headers["Location"].split("?")[0]) == (303, f"/q/p/jobs/{dead}")
    finally:
        d.close()


def test_domain_errors_map_to_statuses(dash, dead):
    r = dash.get("/jobs/nope")
    assert r.status_code == 404 and b"no job" in r.data
    r = dash.get("/jobs/nope/output.json")
    assert r.status_code == 404 and r.is_json and "nope" in r.json["error"]
    for query, error in [("attempt=x", "attempt, out and err are whole numbers"), ("out=1.5", "whole numbers"),
                         ("err=z", "whole numbers"), ("out=-1", "out must be a whole number from 0 to 9223372036854775807"),
                         ("attempt=0", "attempt must be a whole number from 1"), ("attempt=" + "9" * 23, "attempt must"),
                         (f"out={2**63}", "out must"), (f"err={2**64}", "err must")]:
        r = dash.get(f"/jobs/{dead}/output.json?{query}")
        assert r.status_code == 400 and r.is_json, query
        assert error in r.json["error"] and "\n" not in r.json["error"], (query, r.json)
    r = dash.get(f"/jobs?before={2**63}")  # past what a store holds: bad input, not a database error
    assert r.status_code == 400 and b"before (a job&#39;s seq) must be a whole number" in r.data, r.data[:300]
    r = dash.get(f"/jobs/{dead}/output.json?attempt=1&out=0&err=0")
    assert r.status_code == 200 and r.json["state"] == "dead" and r.json["ended"] is True
    assert r.json["stderr"] == "boom"
    token = token_in(dash.get(f"/jobs/{dead}").data)
    r = dash.post("/schedules/none/pause", data={"csrf": token})
    assert r.status_code == 404 and b"no schedule none" in r.data
    r = dash.post(f"/jobs/{dead}/cancel", data={"csrf": token})
    assert r.status_code == 409, r.data
    for action in ("cancel", "retry"):  # no such job: 404, whichever the action
        r = dash.post(f"/jobs/nope/{action}", data={"csrf": token}, headers={"Accept": "application/json"})
        assert (r.status_code, r.json) == (404, {"error": "no job with id 'nope'"}), action
    assert app_module.status_for(PermissionDenied("x")) == 403  # before InvalidInput, its base class


def test_two_requests_within_the_interval_read_the_store_once(db, tmp_path):
    calls: list[str] = []
    d = Dashboard(db, tmp_path, open_store=lambda read_only: Counting(
        Database(db, "test").store(read_only=read_only), calls), interval=60.0)
    try:
        def reads() -> list[str]:  # describe() names the database and reads none of it
            return [name for name in calls if name != "describe"]

        assert d.get("/queues").status_code == 200
        first = reads()
        assert first
        for path in ("/queues", "/workers", "/schedules"):
            assert d.get(path).status_code == 200
        assert reads() == first
    finally:
        d.close()


def test_commands_and_output_are_escaped(dash, store):
    steps.add(store, time.time(), id="x1", command="echo '<script>alert(1)</script>' '\"><img src=x>'")
    page = dash.get("/jobs/x1")
    assert b"<script>alert" not in page.data and b"<img src=x" not in page.data
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in page.data
    listed = dash.get("/jobs")
    assert b"<script>alert" not in listed.data and b"&lt;script&gt;" in listed.data


def test_a_job_page_holds_its_output_as_text_and_the_positions_to_follow_on_from(dash, store):
    """Readable without script: the output as kept is in the page, escaped, and the script follows on from the
    byte positions the page was read to."""
    now = time.time()
    steps.add(store, now, id="o1", command="true", max_retries=0)
    worker = steps.register(store, now=now)
    steps.claim(store, worker, [], 1, now)
    out = "<script>alert(1)</script> é\n".encode()
    assert steps.finish(store, worker, [steps.Outcome("o1", True, 0, None, out, b"warn")], now) == [JobState.COMPLETED]
    page = dash.get("/jobs/o1").data.decode()
    assert '<pre id="stdout" class="output">&lt;script&gt;alert(1)&lt;/script&gt; é\n</pre>' in page
    assert '<pre id="stderr" class="output">warn</pre>' in page
    assert f'data-attempt="1" data-out="{len(out)}" data-err="4"' in page
    assert "the job has ended (completed)" in page


def test_no_page_shows_the_database_password(pg_uri, tmp_path):
    """A PostgreSQL URI with a password (the test server trusts it, so any password connects): no page, no
    JSON and no error answer holds it, nor its percent-encoded form."""
    from urllib.parse import quote

    from queuectl.store import open_store

    password = "s3cr3t-Pw/x"
    uri = pg_uri.replace("postgresql://postgres@", f"postgresql://postgres:{quote(password, safe='')}@", 1)
    assert uri != pg_uri
    with open_store(uri) as store:
        steps.add(store, time.time(), id="j1", command="true")
    d = Dashboard(uri, tmp_path)
    try:
        answers = [d.get(path) for path in ("/", "/?part=live", "/jobs", "/jobs/j1", "/jobs/j1/output.json", "/queues",
                                           "/workers", "/schedules", "/jobs/nope", "/jobs?state=nope")]
        assert [r.status_code for r in answers] == [200] * 8 + [404, 400]
        bodies = [r.get_data(as_text=True) for r in answers]
        assert all(password not in b and quote(password, safe="") not in b for b in bodies)
        assert "postgres@" in bodies[0]  # the database is named, without its password
    finally:
        d.close()


def test_the_workers_of_this_host_show_their_unit_state_read_once_for_every_page(db, tmp_path, store):
    from queuectl.host import procs
    from queuectl.api.units import Units

    asked: list[tuple[str, ...]] = []

    def show(names):  # systemctl show's stand-in (its real output: tests/system/test_web_service.py)
        asked.append(tuple(names))
        return [{"Id": n, "ActiveState": "activating", "SubState": "auto-restart", "NRestarts": "3"} for n in names]

    now = time.time()
    steps.register(store, "here", now=now, host=procs.hostname(), unit="queuectl-worker@here.service")
    steps.register(store, "there", now=now, host="elsewhere", unit="queuectl-worker@here.service")
    d = Dashboard(db, tmp_path, units=Units(show=show))
    try:
        for path in ("/workers", "/", "/?part=live", "/workers"):
            page = d.get(path).data.decode()
            here = re.search(r"<tr><td>here</td>.*?</tr>", page, re.S).group(0)
            there = re.search(r"<tr><td>there</td>.*?</tr>", page, re.S).group(0)
            assert '<td class="unit-state">activating (auto-restart)</td><td class="restarts">3</td>' in here, path
            # systemd is asked on this host only: the other host's unit of the same name is another unit
            assert '<td class="unit">queuectl-worker@here.service</td>' in there, path
            assert '<td class="unit-state">-</td><td class="restarts">-</td>' in there, path
        assert asked == [("queuectl-worker@here.service",)]
    finally:
        d.close()
