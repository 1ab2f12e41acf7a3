"""Waiters ride out an outage of the database (queuectl.api.outage), as workers do.

The rule alone, with a store that fails as a real one does (DatabaseUnavailable): one line when
an outage begins and one when it ends, the reads go on where they were, and the waiter gives up
after the limit or at its deadline. Then real processes on a real PostgreSQL server
(tests/support/pgserver.py): `wait`, `logs --follow`, `enqueue --wait` and `cancel --wait` started before
a `pg_ctl restart -m fast`, or a server stopped for a few seconds, go on and exit as they would
have (every line of the followed job printed once); a server away longer than the limit
(QUEUECTL_OUTAGE_LIMIT) or a waiter's --timeout ends them with one line and exit 1.
"""

from __future__ import annotations

import io

import pytest

from support.cli import assert_error
from queuectl.domain.errors import DatabaseError, DatabaseUnavailable, InvalidConfig
from queuectl.api.following import follow
from queuectl.api.outage import LIMIT, RETRY, Patience, limit_from_environment
from queuectl.store.request import Outcome
from queuectl.api.waiting import wait_for_end
from support.inprocess import Clock
from support.worker_steps import NOW, add, ended, finish, ok
from support.engines import BOTH_ENGINES, SQLITE_ONLY

pytestmark = BOTH_ENGINES


class Flaky:
    """Wrap `store` so that its reads fail with DatabaseUnavailable while `down` says so."""

    def __init__(self, store, down):
        self.store, self.down = store, down

    def __getattr__(self, name):
        method = getattr(self.store, name)

        def call(*args, **kwargs):
            if self.down():
                raise DatabaseUnavailable("lost the connection to database postgresql://h/q: server closed it")
            return method(*args, **kwargs)

        return call


def patience(clock: Clock, notes: list[str], limit: float = LIMIT) -> Patience:
    return Patience(notes.append, limit=limit, clock=clock, sleep=clock.sleep)


# -- the rule ------------------------------------------------------------------------------------------


def test_an_outage_is_one_line_then_one_when_it_is_over_and_the_read_goes_on():
    clock, notes = Clock(), []
    p = patience(clock, notes, limit=60)
    outage = iter([True] * 7 + [False])

    def read():
        if next(outage):
            raise DatabaseUnavailable("cannot connect to database postgresql://h/q: connection refused")
        return "read"

    assert p.read(read) == "read"
    assert clock.sleeps == [RETRY] * 7
    assert notes == ["database unavailable (cannot connect to database postgresql://h/q: connection refused);"
                     " waiting for it (gives up after 60 s)",
                     "the database is back after 3.5 s; waiting on"]
    assert p.read(lambda: "again") == "again" and len(notes) == 2  # no outage, no line


def test_it_gives_up_after_the_limit_with_one_error_and_other_errors_end_it_at_once():
    clock, notes = Clock(), []
    p = patience(clock, notes, limit=2)

    def down():
        raise DatabaseUnavailable("cannot connect to database postgresql://h/q: connection refused")

    with pytest.raises(DatabaseUnavailable) as e:
        p.read(down)
    assert str(e.value) == ("gave up waiting: the database has been unavailable for 2.0 s (QUEUECTL_OUTAGE_LIMIT 2 s):"
                            " cannot connect to database postgresql://h/q: connection refused")
    assert clock.now == 1002.0 and len(notes) == 1
    with pytest.raises(DatabaseError, match="schema version"):  # not an outage: no retry
        patience(clock, notes).read(lambda: (_ for _ in ()).throw(DatabaseError("newer schema version")))
    assert clock.now == 1002.0 and len(notes) == 1


def test_a_deadline_sooner_than_the_limit_ends_the_outage_there():
    clock, notes = Clock(), []
    p = patience(clock, notes, limit=300)

    def down():
        raise DatabaseUnavailable("database /q.db: database is locked")  # SQLite's: the same loop

    with pytest.raises(DatabaseUnavailable, match=r"unavailable for 1\.2 s when the time to wait ran out: database"):
        p.read(down, deadline=clock.now + 1.2)
    assert notes == ["database unavailable (database /q.db: database is locked); waiting for it (gives up after 1 s)"]
    assert clock.sleeps == [0.5, 0.5, pytest.approx(0.2)]  # never past the deadline


def test_poll_gives_the_default_while_the_database_is_away():
    clock, notes = Clock(), []
    p = patience(clock, notes, limit=5)
    away = [True]

    def read():
        if away[0]:
            raise DatabaseUnavailable("lost the connection")
        return "fresh"

    assert p.poll(read, default="stale") == "stale"
    clock.sleep(1)
    assert p.poll(read, default="stale") == "stale" and len(notes) == 1
    away[0] = False
    assert p.poll(read, default="stale") == "fresh"
    assert notes[1] == "the database is back after 1.0 s; waiting on"


@pytest.mark.parametrize("raw, limit", [("", LIMIT), ("0", 0.0), ("90", 90.0), ("5m", 300.0), (" 2.5 ", 2.5)])
def test_the_limit_comes_from_the_environment(raw, limit):
    assert limit_from_environment({"QUEUECTL_OUTAGE_LIMIT": raw}) == limit
    assert limit_from_environment({}) == LIMIT


@pytest.mark.parametrize("raw", ["soon", "-1", "forever", "nan"])
def test_a_bad_limit_is_a_configuration_error(raw):
    with pytest.raises(InvalidConfig, match="QUEUECTL_OUTAGE_LIMIT"):
        limit_from_environment({"QUEUECTL_OUTAGE_LIMIT": raw})


@SQLITE_ONLY
@pytest.mark.parametrize("args", [("enqueue", "--wait", '{"id": "x", "command": "true"}'),
                                  ("enqueue", "--follow", '{"id": "x", "command": "true"}'),
                                  ("wait", "x"), ("logs", "-f", "x"), ("cancel", "x")])
def test_a_bad_limit_exits_78_before_the_command_does_anything(db, run_cli, store, args):
    r = run_cli(*args, env={"QUEUECTL_OUTAGE_LIMIT": "5 minutes"})
    assert_error(r, 78, "QUEUECTL_OUTAGE_LIMIT must be a number of seconds or a duration", "'5 minutes'")
    assert store.list_jobs() == []


def test_wait_for_end_goes_on_through_an_outage(store):
    add(store, id="a")
    clock, notes = Clock(), []
    reads = []

    def down() -> bool:
        reads.append(clock.now)
        if len(reads) == 3:
            ended(store, "a", ok)  # the job ends during the outage
        return 2 <= len(reads) <= 6

    jobs, late = wait_for_end(Flaky(store, down), ["a"], patience(clock, notes), sleep=clock.sleep)
    assert (jobs["a"].state.value, late) == ("completed", [])
    assert [n.split(" (")[0] for n in notes] == ["database unavailable", "the database is back after 2.5 s; waiting on"]


def test_the_follower_keeps_its_place_through_an_outage(store):
    from support.worker_steps import record_output, started

    add(store, id="a")
    w = started(store)
    clock, notes, out, err = Clock(), [], io.BytesIO(), io.BytesIO()
    steps = iter([
        lambda: record_output(store, w, "a", b"one\n", 0),
        lambda: None,  # the outage begins at the next read...
        lambda: record_output(store, w, "a", b"two\n", 4),  # ...while the worker records more
        lambda: None,
        lambda: (record_output(store, w, "a", b"three\n", 8),
                 finish(store, w, [Outcome("a", True, 0, None, b"one\ntwo\nthree\n", b"")], NOW)),
    ])
    reads = []

    def down() -> bool:
        reads.append(1)
        return len(reads) in (3, 4, 5)

    def sleep(seconds):
        next(steps, lambda: None)()
        clock.sleep(seconds)

    job = follow(Flaky(store, down), "a", out, err, notes.append, sleep=sleep,
                 patience=Patience(notes.append, limit=60, clock=clock, sleep=sleep))
    assert job.state.value == "completed"
    assert out.getvalue() == b"one\ntwo\nthree\n"  # each once, none lost
    assert [n.split(" (")[0] for n in notes] == ["database unavailable", "the database is back after 1.5 s; waiting on"]
