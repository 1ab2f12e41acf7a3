"""Waiters ride out an outage of a real PostgreSQL server (tests/support/pgserver.py), as workers do:
`wait`, `logs --follow`, `enqueue --wait` and `cancel --wait` started before a `pg_ctl restart -m fast`,
or a server stopped for a few seconds, go on and exit as they would have (every line of the followed
job printed once); a server away longer than the limit (QUEUECTL_OUTAGE_LIMIT) or a waiter's --timeout
ends them with one line and exit 1. The rule alone: tests/unit/test_waiters_outage.py."""
from __future__ import annotations

import json
import re
import signal
import time
from urllib.parse import unquote

import pytest

from support.cli import Waiter, configure, enqueue
from support.procstat import tcp_ports
from support.waiting import wait_for
from support.engines import BOTH_ENGINES, POSTGRESQL_ONLY

pytestmark = BOTH_ENGINES


# -- real processes, a real server ---------------------------------------------------------------------


#: What each kind of waiter runs while it waits (the last statement its connection ran, as
#: pg_stat_activity shows it): the reads of wait, enqueue --wait and cancel --wait (Store.jobs_by_id;
#: not cancel's own `SELECT id, seq ... WHERE id IN`), and the follower's (Store.read_output).
POLLING = {"jobs by id": "SELECT seq, id, queue, command, %FROM queuectl.jobs WHERE id IN%",
           "output": "%out_attempt%"}


def polls(pg_server, db: str, waiter: Waiter, kind: str) -> bool:
    """True once `waiter` is in its waiting loop: its connection last ran, and finished, a read of `kind`."""
    dbname = unquote(db.rsplit("/", 1)[1])
    ports = sorted(tcp_ports(waiter.proc.pid))
    return bool(ports) and pg_server.sql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state = 'idle' AND query LIKE %s"
        " AND client_port = ANY(%s)", params=(dbname, POLLING[kind], ports))[0][0] > 0


#: Seconds a process may take to start and reach a point the test waits for: generous, for a machine
#: loaded by other test runs (a load of 30 on 2 cores made 30 s too few).
START = 180.0
#: The followed job: 40 lines, the last 20 once the test has made the file GATE.
TALK = ("for i in $(seq 40); do echo line $i; sleep 0.02;"
        " if [ $i = 20 ]; then while [ ! -e {gate} ]; do sleep 0.02; done; fi; done")
LINES = "".join(f"line {i}\n" for i in range(1, 41))


def _waiters(db: str, run_cli, pg_server, workers, tmp_path, env: dict | None = None,
             extra: dict[str, tuple[str, ...]] | None = None) -> tuple[dict, object, object]:
    """Waiters in their waiting loops, each in a process of its own with `env`: `logs -f talk` (TALK),
    `enqueue --wait` of deploy (waits for the gate), `wait talk deploy`, `cancel --wait 120 stubborn`,
    and the `extra` ones (name: arguments, without `env`), started last. A worker runs talk and deploy;
    another runs stubborn and is stopped (SIGSTOP) before the cancel, so that the cancel waits until
    the test lets it go on. Returns (the waiters by name, the gate, a function that lets it go on)."""
    configure(run_cli, ("poll-interval", "0.1"), ("stale-after", "600"))  # no recovery of the stopped one
    gate = tmp_path / "gate"
    enqueue(run_cli, id="talk", command=TALK.format(gate=gate))
    enqueue(run_cli, id="stubborn", queue="slow", command="while true; do sleep 0.02; done")
    workers.start("--count", "2", "--queue", "default")
    frozen = workers.start("--queue", "slow")
    waiters = {"follow": Waiter(db, tmp_path, "follow", "logs", "-f", "talk", env=env),
               "enqueue": Waiter(db, tmp_path, "enqueue", "enqueue", "--wait", json.dumps(
                   {"id": "deploy", "command": f"while [ ! -e {gate} ]; do sleep 0.02; done"}), env=env)}
    wait_for(lambda: waiters["enqueue"].out() == "deploy\n", timeout=START, message="the enqueue")
    waiters["wait"] = Waiter(db, tmp_path, "wait", "wait", "talk", "deploy", env=env)
    wait_for(lambda: {j["id"] for j in json.loads(run_cli("list", "--state", "processing", "--json").stdout)}
             == {"stubborn", "talk", "deploy"}, timeout=START, message="the three jobs to run")
    frozen.send_signal(signal.SIGSTOP)
    waiters["cancel"] = Waiter(db, tmp_path, "cancel", "cancel", "stubborn", "--wait", "120", env=env)
    wait_for(lambda: waiters["follow"].out().count("\n") == 20 and polls(pg_server, db, waiters["follow"], "output")
             and all(polls(pg_server, db, waiters[n], "jobs by id") for n in ("enqueue", "wait", "cancel")),
             timeout=START, message="the waiters to poll")
    for name, args in (extra or {}).items():
        waiters[name] = Waiter(db, tmp_path, name, *args)
        wait_for(lambda: polls(pg_server, db, waiters[name], "jobs by id"), timeout=START, message=f"{name} to poll")
    return waiters, gate, lambda: frozen.send_signal(signal.SIGCONT)


# The tests of real processes (POSTGRESQL_ONLY): on PostgreSQL, whose server they restart and stop.


@pytest.fixture
def server_back(pg_server):
    """The session's server, started again after the test if it stopped it."""
    yield pg_server
    if not pg_server.running():
        pg_server.start()


@POSTGRESQL_ONLY
@pytest.mark.parametrize("outage", ["restart -m fast", "stopped for 3 s"])
def test_waiters_go_on_through_an_outage_and_exit_as_they_would_have(outage, db, run_cli, server_back, workers,
                                                                      tmp_path):
    pg_server = server_back
    waiters, gate, go_on = _waiters(db, run_cli, pg_server, workers, tmp_path)
    if outage == "restart -m fast":
        pg_server.restart("fast")
    else:
        pg_server.stop("fast")
        down = time.monotonic()
        wait_for(lambda: all("database unavailable" in w.err() for w in waiters.values()), timeout=START,
                 message=f"every waiter to see the outage: {waiters}")
        assert all(w.proc.poll() is None for w in waiters.values()), waiters
        time.sleep(max(0.0, 3 - (time.monotonic() - down)))  # the fault's length
        pg_server.start()
    gate.touch()
    go_on()
    codes = {name: w.finish() for name, w in waiters.items()}
    assert codes == dict.fromkeys(waiters, 0), "\n".join(map(repr, waiters.values()))
    assert waiters["follow"].out() == LINES  # every line once, in order
    assert waiters["enqueue"].out() == "deploy\n" and waiters["wait"].out() == ""
    assert waiters["cancel"].out() == "stubborn: stopped and cancelled\n"
    for w in waiters.values():
        lines = w.err().splitlines()
        assert len(lines) == 2, w
        limit = "300" if w.name != "cancel" else r"1[012]\d"  # cancel: its --wait 120 comes first
        assert re.fullmatch(r"queuectl: database unavailable \((lost the connection to|cannot connect to) database"
                            rf" postgresql://.*\); waiting for it \(gives up after {limit} s\)", lines[0]), w
        assert lines[1].startswith("queuectl: the database is back after "), w
    assert all(p.poll() is None for p in workers.procs)  # the worker rode it out too


@POSTGRESQL_ONLY
def test_an_outage_longer_than_the_limit_or_the_timeout_ends_a_waiter_with_one_line_and_exit_1(
        db, run_cli, server_back, workers, tmp_path):
    pg_server = server_back
    waiters, _, _ = _waiters(db, run_cli, pg_server, workers, tmp_path, env={"QUEUECTL_OUTAGE_LIMIT": "2"},
                             extra={"timeout": ("wait", "talk", "--timeout", "20")})  # the default limit, 300 s
    pg_server.stop("fast")
    down = time.monotonic()
    codes = {name: w.finish() for name, w in waiters.items()}
    took = time.monotonic() - down
    assert codes == dict.fromkeys(waiters, 1), "\n".join(map(repr, waiters.values()))
    assert 2 <= took < 60, (took, waiters)  # the limit, or the timeout waiter's 20 s: not never
    assert waiters["follow"].out() == LINES[:LINES.index("line 21")]  # what it printed before stays printed
    for name, w in waiters.items():
        lines = w.err().splitlines()
        assert len(lines) == 2 and lines[0].startswith("queuectl: database unavailable ("), w
        why = "when the time to wait ran out" if name == "timeout" else "(QUEUECTL_OUTAGE_LIMIT 2 s)"
        assert lines[1].startswith("queuectl: error: gave up waiting: the database has been unavailable for "), w
        assert why in lines[1], w
