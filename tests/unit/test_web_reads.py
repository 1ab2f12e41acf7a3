"""The dashboard's connections (queuectl.web.reads) on a real SQLite file: the Reader lets reads alone through,
every request thread may use the shared connections in turn, and one snapshot serves every request of an
interval."""

from __future__ import annotations

import threading
import time

import pytest

from queuectl.api.database import Database
from queuectl.api.ops import retry
from queuectl.domain.errors import PermissionDenied
from queuectl.domain.models import JobState
from queuectl.web.reads import READS, Connections, Reader
from support import worker_steps as steps
from support.inprocess import Clock
from support.webapp import Counting


@pytest.fixture
def opened(db):
    """(Connections on `db` at interval 3 s with a clock the test moves, the store calls made, the clock)."""
    Database(db, "test").store().close()  # made, as `queuectl web` makes it before serving
    calls: list[str] = []
    clock = Clock()
    conns = Connections(lambda read_only: Counting(Database(db, "test").store(read_only=read_only), calls), 3.0,
                        clock=clock)
    yield conns, calls, clock
    conns.close()


def test_the_reader_refuses_every_method_but_the_reads(opened):
    conns, _, _ = opened
    assert conns.read(lambda store: store.counts()) is not None
    for name in ("enqueue", "retry", "cancel", "set_paused", "purge", "execute", "conn"):
        assert name not in READS
        with pytest.raises(PermissionDenied, match=f"{name} is not a read"):
            conns.read(lambda store: getattr(store, name))
    reader = Reader(object())
    with pytest.raises(PermissionDenied):
        reader.close  # noqa: B018 (closing is not a read either)


def test_the_reading_connection_is_read_only_on_sqlite(opened):
    conns, _, _ = opened
    assert conns.read(lambda store: store.can_write()) is not None  # mode=ro: the file is not writable through it


def test_request_threads_take_turns_on_one_connection(opened):
    conns, _, _ = opened
    conns.describe()  # opened in this thread
    got, errors = [], []

    def request():
        try:
            got.append(conns.read(lambda store: store.counts()))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=request) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 4


def test_one_snapshot_serves_every_request_within_the_interval(opened):
    conns, calls, clock = opened
    first = conns.snapshot()
    reads = len(calls)
    assert reads > 0
    clock.now += 2.9
    assert conns.snapshot() is first and len(calls) == reads
    clock.now += 0.2
    assert conns.snapshot() is not first and len(calls) > reads


def test_history_is_kept_per_span_and_an_action_drops_the_snapshot_alone(opened, store):
    conns, calls, clock = opened
    first = conns.window(3600.0, 60.0)
    reads = len(calls)
    clock.now += 10
    assert conns.window(3600.0, 60.0) is first and len(calls) == reads
    snap = conns.snapshot()
    now = time.time()
    steps.add(store, now, id="d1", command="exit 3", max_retries=0)
    worker = steps.register(store, now=now)
    [job] = steps.claim(store, worker, [], 1, now)
    assert steps.finish(store, worker, [steps.bad(job.id, 3)], now) == [JobState.DEAD]
    assert conns.act(lambda store: retry(store, ["d1"])) == [JobState.PENDING]
    history = conns.reads["history"]
    assert conns.window(3600.0, 60.0) is first and conns.reads["history"] == history  # not read again
    after = conns.snapshot()
    assert after is not snap and after.totals["pending"] == 1  # the next page shows the retry
