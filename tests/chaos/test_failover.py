"""Failover: the primary stops at once mid-drain and its synchronous standby is promoted.

A primary and a streaming standby of its own (tests/support/pgserver.py: pg_basebackup -R, listed in the
primary's synchronous_standby_names) serve one queue, which every queuectl process reaches through
the multi-host URI `postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write`.
Two workers of two slots drain a few hundred jobs of 0 to 50 ms that log every run (tests/chaos/load.py),
while `wait` waits for the last ones, `enqueue --wait` waits for a job of its own and `logs -f` follows a
job that prints lines; both of those run through the failover. Once a quarter of the jobs have completed,
the primary stops with `pg_ctl stop -m immediate` (its processes end without a shutdown checkpoint, as in
a crash), the two held jobs end while no server takes writes, and the standby is promoted.

It proves: every job completed and ran exactly once (one start line each in the log, attempt 1, no
overlap), no worker exited (each alive at the end, then drains on SIGTERM with exit 0), no recovery of a
live worker, and the waiters exit 0 with their output complete: `logs -f` printed every line once.

A second test shows what an asynchronous standby loses when it had not received the last commits (it
stopped receiving before them): an acknowledged enqueue, a cancel, and a job's recorded end, whose
worker then finds the job running there again in the database and ends it failed (RUN_LOST), so that
it runs again under the retry rule.
"""

from __future__ import annotations

import json
import time

import pytest

from support.cli import Waiter
from support.suite import require_postgres
from support.waiting import wait_for
from support.pgserver import PgServer
from support.procstat import tcp_ports
from queuectl.worker import RUN_LOST

from .fleet import Fleet


DBNAME = "failover"
JOBS = 400
#: The failover comes once this share of the jobs has completed: mid-drain.
AT = 0.25
#: Lines the followed job prints before it is held, and after.
LINES_BEFORE, LINES_AFTER = 10, 10
#: Seconds each waiter may take to exit once every job has completed.
WAITER_EXIT = 60


@pytest.fixture
def pair(request):
    """A primary and its streaming standby, both of their own (the session's server stays up); the
    standby is synchronous unless the test parametrizes this fixture (indirect) with False."""
    require_postgres()
    primary, standby = PgServer(), None
    try:
        primary.start()
        primary.create_database(DBNAME)
        standby = primary.standby("queuectl_standby", synchronous=getattr(request, "param", True))
        yield primary, standby
    finally:
        for server in filter(None, (standby, primary)):
            server.cleanup()


@pytest.fixture
def db(pair) -> str:
    primary, standby = pair
    return (f"postgresql://postgres@{primary.host}:{primary.port},{standby.host}:{standby.port}/{DBNAME}"
            "?target_session_attrs=read-write")


def reading(waiter: Waiter, server: PgServer) -> bool:
    """True once `waiter` reads the jobs through a connection of its own to `server`: past its start (a command
    that cannot connect at its start exits 1 at once), in the loop that rides out an outage."""
    ports = tcp_ports(waiter.proc.pid)
    return bool(ports) and bool(server.sql(
        "SELECT 1 FROM pg_stat_activity WHERE client_port = ANY(%s) AND query LIKE '%%queuectl.jobs%%'",
        params=(sorted(ports),)))


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
    wait_for(lambda: follow.out() == lines(1, LINES_BEFORE), timeout=30,
             message=f"logs -f to print the first lines: {follow.result(0)}")
    wait_for(lambda: fleet.sql("SELECT count(*) FROM queuectl.jobs WHERE id IN ('printer', 'waited')"
                               " AND state = 'processing'") == [(2,)], timeout=30,
             message=f"the held jobs to run: {enqueue_wait.result(0)}{fleet.logs()}")
    waiters.append(Waiter(db, tmp_path, "wait", "wait", *fleet.ids[JOBS - 50:JOBS], "printer", "waited"))
    wait_for(lambda: all(reading(w, primary) for w in waiters), timeout=30,
             message=f"the waiters to read the jobs: {[w.result(0) for w in waiters]}")
    wait_for(lambda: fleet.completed() >= AT * JOBS, timeout=60, message=f"the drain: {fleet.states()}")
    done_at_failover = fleet.completed()
    in_flight = {w.name: w.proc.poll() is None for w in waiters}

    began = time.monotonic()
    primary.stop("immediate")
    release.touch()  # the held jobs end while no server takes writes: their workers hold the results
    standby.promote()
    promoted = time.monotonic() - began
    fleet.server = standby  # where the test reads the queue behind queuectl's back from now on
    fleet.wait_drained(timeout=90)
    drained = time.monotonic() - started
    results = {w.name: w.result(WAITER_EXIT) for w in waiters}

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
    """The fault tests' Fleet (tests/chaos/fleet.py) on the pair, read through the primary."""
    return Fleet(db, pair[0], run_cli, workers, tmp_path)


@pytest.mark.parametrize("pair", [False], ids=["asynchronous"], indirect=True)
def test_failover_to_an_asynchronous_standby_behind_loses_what_it_had_not_received(
        pair, db, fleet_on_pair, run_cli, tmp_path, figures):
    """What docs/postgresql.md says asynchronous replication can lose, shown: the standby stops receiving (stopped,
    as a standby that lags far behind) while the primary acknowledges an enqueue, a job's recorded end and a
    cancel; the primary then fails and the standby is promoted without them."""
    primary, standby = pair
    fleet = fleet_on_pair
    release = tmp_path / "release"
    for n in range(2):
        fleet.start(f"w{n}")
    fleet.settle()
    fleet.enqueue([{"id": "ended", "command": fleet.log.command(until=release)},
                   {"id": "cancelled", "command": "true", "delay": 3600}])
    replicated = "SELECT id, state, started_at IS NOT NULL FROM queuectl.jobs ORDER BY id"
    wait_for(lambda: standby.sql(replicated, dbname=DBNAME) == [("cancelled", "pending", False),
                                                               ("ended", "processing", True)],
             timeout=30, message=f"the standby to have the running job, its start recorded: {fleet.logs()}")

    standby.stop("fast")  # from here on, the standby receives nothing
    release.touch()
    wait_for(lambda: fleet.sql("SELECT state FROM queuectl.jobs WHERE id = 'ended'") == [("completed",)],
             timeout=30, message=f"the end to be recorded: {fleet.logs()}")
    acknowledged = {"enqueue": run_cli("enqueue", '{"id": "acked", "command": "true"}').exit_code,
                    "cancel": run_cli("cancel", "cancelled").exit_code}
    assert acknowledged == {"enqueue": 0, "cancel": 0}
    assert fleet.states() == {"completed": 2, "cancelled": 1}  # "acked" ran too

    primary.stop("immediate")
    standby.start()
    standby.promote()
    fleet.server = standby
    try:
        wait_for(lambda: fleet.log.read().started["ended"] == 2 and fleet.states() == {"completed": 1,
                                                                                               "pending": 1},
                 timeout=60)
    except AssertionError as e:  # what the queue and the workers say at the end of the wait
        raise AssertionError(f"{e}: the job whose end was lost to run again:"
                             f" {fleet.sql('SELECT id, state, worker_id, attempts, last_error FROM queuectl.jobs')}"
                             f"{fleet.logs()}") from None
    lost = run_cli("show", "acked")

    figures.add("acknowledged before the failover", acknowledged)
    figures.add("after it", {j: s for j, s in fleet.sql("SELECT id, state FROM queuectl.jobs ORDER BY id")})
    figures.add("runs of the job whose end was lost", fleet.log.read().started["ended"])
    assert lost.exit_code == 1 and "no job" in lost.stderr, (lost.exit_code, lost.stderr)  # the enqueue, lost
    assert fleet.sql("SELECT state FROM queuectl.jobs WHERE id = 'cancelled'") == [("pending",)]  # the cancel, lost
    # The end, lost: its worker found the job still running there, ended it failed (counted) and it ran again.
    assert fleet.sql("SELECT state, attempts FROM queuectl.jobs WHERE id = 'ended'") == [("completed", 2)]
    assert f"job ended: {RUN_LOST}; it ends failed" in fleet.logs_in_full(), fleet.logs()
    assert all(p.poll() is None for p in fleet.procs.values()), fleet.logs()
