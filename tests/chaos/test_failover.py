"""Failover: the primary stops at once mid-drain and its synchronous standby is promoted.

A primary and a streaming standby of its own (tests/pgserver.py: pg_basebackup -R, listed in the
primary's synchronous_standby_names) serve one queue, which every queuectl process reaches through
the multi-host URI `postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write`.
Two workers of two slots drain a few hundred jobs of 0 to 50 ms that log every run (tests/chaos/load.py),
while `wait` waits for the last ones, `enqueue --wait` waits for a job of its own and `logs -f` follows a
job that prints lines; both of those run through the failover. Once a quarter of the jobs have completed,
the primary stops with `pg_ctl stop -m immediate` (its processes end without a shutdown checkpoint, as in
a crash), the two held jobs end while no server takes writes, and the standby is promoted.

It proves: every job completed and ran exactly once (one run each in the log, attempt 1, no overlap),
no worker exited (each alive at the end, then drains on SIGTERM with exit 0), no recovery of a live
worker, and the waiters exit 0 with their output complete: `logs -f` printed every line once.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import QUEUECTL, require_postgres, wait_for
from pgserver import PgServer

from .test_postgres_faults import Fleet

pytestmark = pytest.mark.chaos

DBNAME = "failover"
JOBS = 400
#: The failover comes once this share of the jobs has completed: mid-drain.
AT = 0.25
#: Lines the followed job prints before it is held, and after.
LINES_BEFORE, LINES_AFTER = 10, 10
#: Seconds each waiter may take to exit once every job has completed.
WAITER_EXIT = 60


@pytest.fixture
def pair():
    """A primary and its synchronous streaming standby, both of their own (the session's server stays up)."""
    require_postgres()
    primary, standby = PgServer(), None
    try:
        primary.start()
        primary.create_database(DBNAME)
        standby = primary.standby("queuectl_standby", synchronous=True)
        yield primary, standby
    finally:
        for server in filter(None, (standby, primary)):
            server.cleanup()


@pytest.fixture
def db(pair) -> str:
    primary, standby = pair
    return (f"postgresql://postgres@{primary.host}:{primary.port},{standby.host}:{standby.port}/{DBNAME}"
            "?target_session_attrs=read-write")


class Waiter:
    """A queuectl command run to its end as a real process, its stdout and stderr in files of their own."""

    def __init__(self, db: str, tmp_path, name: str, *args: str):
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen([*QUEUECTL, "--db", db, *args], stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def stdout(self) -> str:
        return self.out.read_text()

    def result(self, timeout: float) -> tuple[int | None, str, str]:
        """(exit code, stdout, stderr) once it exits, within `timeout` seconds; exit code None if it did not."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        return code, self.stdout(), self.err.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def waiters():
    started: list[Waiter] = []
    yield started
    for w in started:
        w.kill()


def lines(first: int, last: int) -> str:
    return "".join(f"line {i}\n" for i in range(first, last + 1))


def test_failover_to_a_synchronous_standby_loses_no_job_runs_none_twice_and_ends_no_process(
        pair, db, fleet_on_pair, waiters, tmp_path, figures):
    primary, standby = pair
    fleet = fleet_on_pair
    release = tmp_path / "release"  # the two held jobs end once it exists
    started = fleet.drain("f", JOBS)
    # A job that prints lines before and after it is held, followed by logs -f; a job of enqueue --wait.
    # Both first (priority), so that both run through the failover.
    held = fleet.log.command(until=release)
    fleet.enqueue([{"id": "printer", "priority": 5,
                    "command": f"printf 'line %d\\n' $(seq 1 {LINES_BEFORE}); {held};"
                               f" printf 'line %d\\n' $(seq {LINES_BEFORE + 1} {LINES_BEFORE + LINES_AFTER})"}])
    follow = Waiter(db, tmp_path, "logs-f", "logs", "-f", "printer")
    enqueue_wait = Waiter(db, tmp_path, "enqueue-wait", "enqueue", "--wait",
                          json.dumps({"id": "waited", "priority": 5, "command": held}))
    fleet.ids.append("waited")
    waiters += [follow, enqueue_wait]

    # Mid-drain, with both held jobs running and logs -f following, and `wait` waiting for the last jobs.
    wait_for(lambda: follow.stdout() == lines(1, LINES_BEFORE), timeout=30,
             message=f"logs -f to print the first lines: {follow.result(0)}")
    wait_for(lambda: fleet.sql("SELECT count(*) FROM queuectl.jobs WHERE id IN ('printer', 'waited')"
                               " AND state = 'processing'") == [(2,)], timeout=30,
             message=f"the held jobs to run: {enqueue_wait.result(0)}{fleet.logs()}")
    waiters.append(Waiter(db, tmp_path, "wait", "wait", *fleet.ids[JOBS - 50:JOBS], "printer", "waited"))
    wait_for(lambda: fleet.completed() >= AT * JOBS, timeout=60, message=f"the drain: {fleet.states()}")
    done_at_failover = fleet.completed()
    in_flight = {w.out.stem: w.proc.poll() is None for w in waiters}

    began = time.monotonic()
    primary.stop("immediate")
    release.touch()  # the held jobs end while no server takes writes: their workers hold the results
    standby.promote()
    promoted = time.monotonic() - began
    fleet.server = standby  # where the test reads the queue behind queuectl's back from now on
    fleet.wait_drained(timeout=90)
    drained = time.monotonic() - started
    results = {w.out.stem: w.result(WAITER_EXIT) for w in waiters}

    figures.add("jobs", len(fleet.ids))
    figures.add("completed when the primary stopped", done_at_failover)
    figures.add("primary stopped (-m immediate) to standby promoted", f"{promoted:.1f} s")
    figures.add("outages the workers logged, longest", f"{max(fleet.outage_lengths(), default=0):.1f} s")
    figures.add("enqueue to all completed", f"{drained:.1f} s")
    figures.add("waiters' exit codes", {name: code for name, (code, _, _) in results.items()})
    figures.add("waiters' last line on stderr", {name: err.strip().rsplit("\n", 1)[-1][-120:]
                                                 for name, (_, _, err) in results.items()})

    assert done_at_failover < len(fleet.ids), "the drain ended before the failover: enqueue more jobs"
    assert all(in_flight.values()), f"a waiter had exited before the failover: {in_flight} {results}"
    fleet.check(figures)  # every job completed once, nothing stuck; both workers alive, then exit 0
    assert results["logs-f"][:2] == (0, lines(1, LINES_BEFORE + LINES_AFTER)), results["logs-f"]
    assert results["enqueue-wait"][:2] == (0, "waited\n"), results["enqueue-wait"]
    assert results["wait"][0] == 0, results["wait"]


@pytest.fixture
def fleet_on_pair(db, pair, run_cli, workers, tmp_path) -> Fleet:
    """The fault tests' Fleet (tests/chaos/test_postgres_faults.py) on the pair, read through the primary."""
    return Fleet(db, pair[0], run_cli, workers, tmp_path)
