"""PostgreSQL under real faults: server restarts, a connection-kill storm, a 30 s outage.

Two workers of two slots drain jobs of 0 to 50 ms that log every run (tests/chaos/load.py)
while the server is restarted six times (`pg_ctl restart -m fast`, 5 s apart), or while one
random queuectl backend is terminated every 200 ms for 60 s, or while the server is stopped
for 30 s. Each proves: every job completed exactly once (one run, attempt 1), no two runs of
a job overlapped, nothing is left pending or processing, both workers are still alive at the
end, drain on SIGTERM and exit 0, and hold no more descriptors than before (no leaked
connection or socket). The outage also proves that commands fail fast with one line and exit
1, that results held through it are recorded after with their true end times, and that the
workers' jobs running through it are not recovered: one of the two workers runs as another
host (another hostname and boot id, so that it is judged by watching its heartbeat count) and
after 30 s without a heartbeat neither worker takes the other's jobs.

The tests use the session's server (tests/support/pgserver.py); a test that stops it starts it again.
"""

from __future__ import annotations

import time

import pytest

from support.cli import timed
from support.engines import ON_POSTGRESQL
from support.waiting import wait_for

from .checks import require_privilege
from .fleet import FAR_HOST, SETTINGS, Fleet, far_host

RESTARTS, RESTART_EVERY = 6, 5.0
STORM_SECONDS, KILL_EVERY = 60.0, 0.2
OUTAGE = 30.0
#: A queuectl command must give up within this many seconds while the server is down.
COMMAND_LIMIT = 10.0


pytestmark = ON_POSTGRESQL  # every test's `db` is a PostgreSQL queue


@pytest.fixture
def fleet(db, pg_server, run_cli, workers, tmp_path) -> Fleet:
    return Fleet(db, pg_server, run_cli, workers, tmp_path)


def test_six_server_restarts_while_two_workers_drain(fleet, pg_server, figures):
    # Heartbeats 5 s apart (the defaults): only the wake-up path sees the LISTEN connection break
    # between two of them, and a busy worker starts jobs all the while.
    started = fleet.drain("r", 3000, settings=(("stale-after", "30"), ("heartbeat-interval", "5")))
    done_at_restart, restart_seconds = [], []
    for _ in range(RESTARTS):
        time.sleep(RESTART_EVERY)  # the cadence of the fault itself
        # Keep the workers busy to the last restart: never fewer left than twice what the last
        # interval drained (a fast machine drains the first 3,000 in well under 30 s).
        done = fleet.completed()
        pace = done - (done_at_restart or [0])[-1]
        if len(fleet.ids) - done < 2 * pace:
            fleet.enqueue(fleet.log.jobs([f"r{i:05d}" for i in range(len(fleet.ids), len(fleet.ids) + 2 * pace)],
                                         max_ms=50))
        began = time.monotonic()
        pg_server.restart("fast")  # every session ended; back when it accepts connections
        restart_seconds.append(time.monotonic() - began)
        done_at_restart.append(fleet.completed())
    fleet.wait_drained(timeout=240)
    elapsed = time.monotonic() - started

    figures.add("server restarts (pg_ctl restart -m fast), longest", f"{RESTARTS}, {max(restart_seconds):.1f} s")
    figures.add("jobs completed at each restart", done_at_restart)
    figures.add("enqueue to all completed", f"{elapsed:.1f} s")
    assert done_at_restart[-1] < len(fleet.ids), "the drain ended before the last restart: enqueue more jobs"
    fleet.check(figures)


def test_a_connection_kill_storm_while_two_workers_drain(fleet, pg_server, figures):
    started = fleet.drain("s", 1200)
    kills = tries = 0
    with pg_server.connect(fleet.dbname) as killer:  # application_name is not queuectl's: never a victim
        while time.monotonic() - started < STORM_SECONDS:
            time.sleep(KILL_EVERY)  # the cadence of the fault itself
            tries += 1
            row = killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'queuectl'"
                " AND datname = current_database() ORDER BY random() LIMIT 1").fetchone()
            kills += bool(row and row[0])
    done_in_storm = fleet.completed()
    fleet.wait_drained(timeout=240)
    elapsed = time.monotonic() - started

    figures.add("backends terminated (of tries, one every 200 ms)", f"{kills} of {tries} in {STORM_SECONDS:.0f} s")
    figures.add("jobs completed during the storm", done_in_storm)
    figures.add("enqueue to all completed", f"{elapsed:.1f} s")
    # The storm really stormed: a backend was found at most tries (at the others, every queuectl
    # connection had just been terminated and its worker had not yet connected again).
    assert kills >= tries / 3, (kills, tries)
    assert done_in_storm >= 0.4 * len(fleet.ids), "the storm stopped the drain"
    fleet.check(figures)


def test_a_30_s_outage_loses_nothing_reruns_nothing_and_recovers_no_live_worker(
        fleet, db, pg_server, tmp_path, figures):
    require_privilege("another host's worker (unshare, a bind mount over /proc's boot id)",
                      [*far_host(tmp_path), "true"])
    through, during = tmp_path / "release-through", tmp_path / "release-during"
    # Each worker serves a queue of its own, so that each holds one job that runs through the
    # outage and one that ends in it (its result held in memory); 20 more wait for the end.
    fleet.start("near", "--queue", "near")
    fleet.start("far", "--queue", "far", far=True)
    fleet.settle()
    for queue in ("near", "far"):
        fleet.enqueue([{"id": f"{queue}-through", "queue": queue, "priority": 2,
                        "command": fleet.log.command(until=through)},
                       {"id": f"{queue}-during", "queue": queue, "priority": 1,
                        "command": fleet.log.command(until=during)}])
        after = fleet.log.jobs([f"{queue}-after-{i}" for i in range(10)], max_ms=50)
        fleet.enqueue([{**j, "queue": queue} for j in after])
    wait_for(lambda: fleet.states().get("processing", 0) == 4, message=f"four jobs to run: {fleet.logs()}")
    hosts = dict(fleet.sql("SELECT name, host FROM queuectl.workers"))

    pg_server.stop("fast")
    down = time.monotonic()
    during.touch()  # two jobs end while the server is down
    wait_for(lambda: sum(1 for j in ("near-during", "far-during")
                         if "end" in fleet.log.read().per_job[j][1]) == 2, message="the held jobs to end")
    commands = {}
    for args in (("status",), ("enqueue", '{"id":"in-outage","command":"true"}'), ("list",)):
        commands[args[0]] = timed(db, *args)
    alive_in_outage = all(p.poll() is None for p in fleet.procs.values())
    time.sleep(max(0.0, OUTAGE - (time.monotonic() - down)))  # the outage's length: the fault itself
    pg_server.start()
    wait_for(lambda: len(fleet.outage_lengths()) >= 2, timeout=30,
             message=f"both workers to write again: {fleet.logs()}")
    resumed = time.monotonic()
    held = {j: fleet.sql("SELECT state, attempts, finished_at FROM queuectl.jobs WHERE id = %s", (j,))[0]
            for j in ("near-during", "far-during")}
    ended = {j: fleet.log.read().per_job[j][1]["end"] / 1e9 for j in held}
    # A recovery of a live worker would come at the first heartbeats once writes work again, and
    # at the latest once stale-after has passed since: wait for that many heartbeats of each worker.
    stale_after = float(dict(SETTINGS)["stale-after"])
    beats = fleet.beats()
    wait_for(lambda: all(b >= beats[n] + stale_after + 2 for n, b in fleet.beats().items()), timeout=60,
             message="stale-after's worth of heartbeats after the outage")
    processing_after = fleet.states().get("processing", 0)
    through.touch()
    fleet.wait_drained(timeout=60)

    figures.add("server down", f"{resumed - down:.1f} s (stopped {OUTAGE:.0f} s; then until both wrote again)")
    figures.add("workers (name: host)", hosts)
    for name, (r, took) in commands.items():
        figures.add(f"`{name}` while down", f"exit {r.returncode} after {took:.2f} s: {r.stderr.strip()[:90]}")
    figures.add("results held through it, recorded after", {j: f"{s}, attempt {a}" for j, (s, a, _) in held.items()})
    figures.add("their finished_at minus their real end", {j: f"{held[j][2] - ended[j]:+.2f} s" for j in held})
    figures.add("jobs still running stale-after after it", processing_after)

    for name, (r, took) in commands.items():
        assert r.returncode == 1 and took < COMMAND_LIMIT, (name, r, took)
        assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("queuectl: error: "), r.stderr
    assert "in-outage" not in fleet.ids and not fleet.sql("SELECT 1 FROM queuectl.jobs WHERE id = 'in-outage'")
    assert alive_in_outage
    assert hosts["far"] == FAR_HOST and hosts["near"] != FAR_HOST, hosts
    assert all((s, a) == ("completed", 1) for s, a, _ in held.values()), held
    # The same instant on two clocks (the server's and this host's) that agree within a second here.
    assert all(abs(held[j][2] - ended[j]) < 1.0 for j in held), (held, ended)
    assert processing_after == 2  # the two jobs that ran through the outage were not taken from their workers
    fleet.check(figures)
