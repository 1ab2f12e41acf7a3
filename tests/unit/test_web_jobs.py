"""The dashboard's jobs page and its bulk actions through Flask's test client on a real SQLite file: the filters as
query parameters, keyset pages, search by id, the dependencies of a job's page, and a bulk cancel or retry that
changes exactly what its filter matches, after a confirmation that shows the count."""

from __future__ import annotations

import html
import re
import time

import pytest

from support.engines import snapshot
from queuectl.domain.models import JobState
from support import worker_steps as steps
from support.webapp import token_in


def error(answer) -> str:
    """The error page's one line, unescaped."""
    return html.unescape(re.search(r'<p class="error" id="error">(.*?)</p>', answer.data.decode()).group(1))


def row_ids(body: bytes) -> list[str]:
    """The ids of the jobs a page lists, in its order."""
    return [m.decode() for m in re.findall(rb'<tr data-job="([^"]+)">', body)]


@pytest.fixture
def jobs(store):
    now = time.time()
    for i in range(7):
        steps.add(store, now, id=f"build-{i}", queue="build", command=f"make target{i}")
    for i in range(3):
        steps.add(store, now, id=f"mail-{i}", queue="mail", command="sendmail", key=f"k{i}")
    steps.add(store, now, id="child", queue="mail", after=["build-0"])
    return now


def test_filters_are_query_parameters_and_pages_follow_by_keyset(dash, jobs, monkeypatch):
    from queuectl.web import pages

    assert row_ids(dash.get("/jobs?queue=mail").data) == ["child", "mail-2", "mail-1", "mail-0"]
    assert row_ids(dash.get("/jobs?text=TARGET3").data) == ["build-3"]  # case-insensitive, in the command
    assert row_ids(dash.get("/jobs?key=k1").data) == ["mail-1"]
    assert row_ids(dash.get("/jobs?after=build-0").data) == ["child"]
    assert row_ids(dash.get("/jobs?id=mail-").data) == ["mail-2", "mail-1", "mail-0"]
    assert row_ids(dash.get("/jobs?state=blocked").data) == ["child"]
    monkeypatch.setattr(pages, "PAGE", 3)
    first = dash.get("/jobs?queue=build")
    assert row_ids(first.data) == ["build-6", "build-5", "build-4"] and b"7 jobs match" in first.data
    seen = row_ids(first.data)
    older = re.search(rb'<a href="([^"]+)" id="older">', first.data)
    while older:
        page = dash.get(older.group(1).decode().replace("&amp;", "&"))
        assert b"queue=build" in older.group(1)  # the filter rides along
        seen += row_ids(page.data)
        older = re.search(rb'<a href="([^"]+)" id="older">', page.data)
    assert seen == [f"build-{i}" for i in range(6, -1, -1)]  # every job once, newest first


def test_an_exact_id_goes_to_the_job_and_its_page_shows_dependencies_both_ways(dash, jobs):
    answer = dash.get("/jobs?id=build-0")
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/jobs/build-0")
    page = dash.get("/jobs/build-0").data.decode()
    assert re.search(r'id="waited-by"><a href="/jobs/child">child</a> \(blocked\)', page)
    assert re.search(r'id="waits-for"><a href="/jobs/build-0">build-0</a> \(pending\)', dash.get("/jobs/child").data.decode())


@pytest.mark.parametrize("query, message", [
    ("state=nope", "no job state 'nope'"), ("before=x", "before is a whole number"),
    ("queue=bad%20name", "queue"), ("text=" + "x" * 201, "longer than 200"),
])
def test_a_bad_filter_is_400_with_one_line(dash, jobs, query, message):
    answer = dash.get(f"/jobs?{query}")
    assert answer.status_code == 400 and message in error(answer)


def test_a_bulk_cancel_confirms_the_count_then_cancels_exactly_what_matches(dash, jobs, store, db):
    before = snapshot(db)
    confirm = dash.get("/bulk?action=cancel&queue=build&text=target1")
    assert confirm.status_code == 200 and snapshot(db) == before  # a GET changes nothing
    assert re.search(rb'id="count">1 job match now', confirm.data)
    token = token_in(confirm.data)
    answer = dash.post("/bulk", data={"csrf": token, "action": "cancel", "queue": "build"})
    assert answer.status_code == 303
    assert dash.get(answer.headers["Location"]).data.count(b'<p class="said" role="status">cancelled 7 of 7 matching jobs') == 1
    states = {j.id: j.state for j in store.list_jobs(limit=100)}
    assert {j for j, s in states.items() if s is JobState.CANCELLED} == {f"build-{i}" for i in range(7)} | {"child"}
    assert all(states[f"mail-{i}"] is JobState.PENDING for i in range(3))  # the filter's, and cancel's cascade only
    retried = dash.post("/bulk", data={"csrf": token, "action": "retry", "queue": "build",
                                       "text": "target2"})
    assert retried.status_code == 303 and store.get_job("build-2").state is JobState.PENDING
    assert store.get_job("build-3").state is JobState.CANCELLED


@pytest.mark.parametrize("form, status, message", [
    ({"action": "cancel"}, 400, "a bulk action needs a filter"),
    ({"action": "purge", "queue": "build"}, 400, "a bulk action is cancel or retry"),
])
def test_a_bulk_action_without_a_filter_or_of_another_kind_is_refused_and_changes_nothing(dash, jobs, db, form,
                                                                                       status, message):
    token = token_in(dash.get("/bulk?action=cancel&queue=build").data)
    before = snapshot(db)
    answer = dash.post("/bulk", data={"csrf": token, **form})
    assert answer.status_code == status and message in error(answer)
    assert snapshot(db) == before


def test_a_viewer_sees_no_bulk_links_and_may_not_confirm_or_act(dash, jobs, db):
    assert b"bulk-cancel" not in dash.get("/jobs?queue=build", user="victor").data
    assert b"bulk-cancel" in dash.get("/jobs?queue=build").data
    assert dash.get("/bulk?action=cancel&queue=build", user="victor").status_code == 403
    before = snapshot(db)
    token = token_in(dash.get("/bulk?action=cancel&queue=build").data)  # an operator's: the role decides
    assert dash.post("/bulk", user="victor", data={"csrf": token, "action": "cancel", "queue": "build"}).status_code == 403
    assert snapshot(db) == before


def test_only_what_this_server_signed_is_said_on_a_page(dash, jobs):
    """A link made elsewhere cannot put words on the dashboard's pages: an unsigned or forged `said` is not shown."""
    for said in ("Your+session+expired,+call+555-0100", "eyJmYWtlIjoxfQ.forged"):
        assert b'class="said"' not in dash.get(f"/jobs?said={said}").data


def test_a_jobs_page_shows_its_ended_attempts_escaped(dash, store):
    now = time.time()
    steps.add(store, now, id="flaky", max_retries=2)
    w = steps.register(store)
    for attempt, error in ((1, '<script>alert(1)</script>'), (2, '"><img src=x onerror=alert(2)>')):
        steps.claim(store, w, [], 1, now + 100 * attempt)
        steps.finish(store, w, [steps.Outcome("flaky", False, attempt + 2, error, ended_at=now + 100 * attempt + 1.5)],
                     now + 100 * attempt + 2)
    page = dash.get("/jobs/flaky").data.decode()
    rows = re.findall(r'<tr data-attempt="(\d)"><td>\d</td><td><span class="state state-(\w+)">.*?<td>([^<]*)</td>'
                      r'<td>(\d+)</td><td>([^<]*)</td></tr>', page)
    assert rows == [("1", "failed", "1.5 s", "3", "&lt;script&gt;alert(1)&lt;/script&gt;"),
                    ("2", "failed", "1.5 s", "4", "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;")]
    assert "<script>alert" not in page and "<img src=x" not in page
    steps.add(store, now, id="calm")
    assert re.search(r'<table id="attempts">.*<tr><td colspan="7">none</td></tr>', dash.get("/jobs/calm").data.decode(),
                     re.S)
