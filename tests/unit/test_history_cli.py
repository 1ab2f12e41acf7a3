"""`queuectl history`, `status`'s rates and the metrics' wait and run time histograms, on SQLite and PostgreSQL:
what they print for a known history, and bad input refused with one line and exit 2."""

import shutil
import subprocess

import pytest

from queuectl.store.request import Exchange, Outcome
from support.worker_steps import add, register
from support.cli import assert_error, assert_ok, parse_metrics
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


@pytest.fixture
def drained(store):
    """Three jobs of queue mail that ran 0.3 s each a second after they were due (two completed, one retry
    scheduled) and one of queue build that completed, in the last minute."""
    now = store.clock()
    w = register(store, now=now)
    for job_id, queue in (("m1", "mail"), ("m2", "mail"), ("m3", "mail"), ("b1", "build")):
        add(store, now=now - 2, id=job_id, queue=queue, max_retries=2)
    store.exchange(w, Exchange(claim=4), [], now)
    store.exchange(w, Exchange(ended=[Outcome(j, j != "m3", 0 if j != "m3" else 1, None, started_at=now - 1,
                                              ended_at=now - 0.7) for j in ("m1", "m2", "m3", "b1")]), [], now)
    store.maintain(w)
    return store


def test_history_as_json_has_the_row_names_and_iso_times(run_cli, drained):
    rows = run_cli.json("history", "--since", "5m")
    assert [(r["queue"], r["started"], r["completed"], r["failed"]) for r in rows] == [
        ("build", 1, 1, 0), ("mail", 3, 2, 1)]
    assert set(rows[0]) == {"at", "queue", "started", "completed", "failed", "dead", "cancelled", "recovered",
                            "wait_p50", "wait_p95", "run_p50", "run_p95"}
    assert rows[0]["at"].endswith("+00:00") and rows[0]["at"][17:] == "00.000+00:00"  # a minute's start
    assert 0.25 <= rows[1]["run_p50"] <= 0.5 and 0.5 <= rows[1]["wait_p95"] <= 1.0
    [mail] = run_cli.json("history", "--queue", "mail", "--step", "1h", "--all-queues")
    assert (mail["queue"], mail["started"], mail["at"][14:]) == ("", 3, "00:00.000+00:00")


def test_history_as_a_table(run_cli, drained):
    lines = assert_ok(run_cli("history")).splitlines()
    assert lines[0].split() == ["TIME", "QUEUE", "START", "DONE", "FAIL", "DEAD", "CANCEL", "RECOV", "WAIT50",
                                "WAIT95", "RUN50", "RUN95"]
    cells = lines[2].split()
    assert cells[2:9] == ["mail", "3", "2", "1", "0", "0", "0"] and cells[9].endswith("ms")
    assert assert_ok(run_cli("history", "--queue", "nothing")) == "no activity in the last 1h\n"


@pytest.mark.parametrize("args, fragment", [
    (("--queue", "a b"), "queue names are"),
    (("--since", "-1"), "--since"),
    (("--since", "forever"), "--since"),
    (("--since", "soon"), "--since"),
    (("--step", "5m"), "--step"),
])
def test_bad_history_input_is_one_line_and_exit_2(run_cli, drained, args, fragment):
    assert_error(run_cli("history", *args), 2, fragment)


def test_status_shows_the_jobs_per_minute(run_cli, drained):
    rates = run_cli.json("status")["rates"]
    assert set(rates) == {"1m", "5m", "15m"}
    assert 3 * 1 / 5 <= rates["5m"]["completed"] <= 3 and rates["15m"]["failed"] == pytest.approx(1 / 15, abs=1e-3)
    text = assert_ok(run_cli("status"))
    assert "Jobs per minute" in text and any(line.split()[:1] == ["completed"] for line in text.splitlines())


def test_metrics_have_wait_and_run_histograms(run_cli, drained, tmp_path):
    text = assert_ok(run_cli("metrics"))
    m = parse_metrics(text)  # a real Prometheus parser
    run = {le: m[("queuectl_job_run_seconds_bucket", (("le", le), ("queue", "mail")))]
           for le in ("0.25", "0.5", "+Inf")}
    assert run == {"0.25": 0, "0.5": 3, "+Inf": 3}  # cumulative
    assert m[("queuectl_job_run_seconds_count", (("queue", "mail"),))] == 3
    assert m[("queuectl_job_run_seconds_sum", (("queue", "mail"),))] == pytest.approx(0.9, abs=1e-3)
    assert m[("queuectl_job_wait_seconds_count", (("queue", "build"),))] == 1
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
