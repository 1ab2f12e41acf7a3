"""The dashboard's load on the database (queuectl.web.reads) on a real SQLite file: requests that find the shared
snapshot stale together read it once; the overview's refreshes read the running and dead lists with the snapshot,
not once a request; and the line the server says at its stop counts the reads by kind."""

from __future__ import annotations

import re
import threading

from queuectl.api.database import Database
from queuectl.web.reads import Connections
from support.webapp import Dashboard

TABS = 8


class Held:
    """A store whose counts() waits until `go` is set: a slow snapshot that requests pile up behind."""

    def __init__(self, store, go: threading.Event):
        self._store, self._go = store, go

    def __getattr__(self, name):
        if name == "counts":
            self._go.wait(30)
        return getattr(self._store, name)


class Counted:
    """A lock that counts the threads that came to take it (`came`, a condition to wait on)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.came = 0
        self.changed = threading.Condition()

    def __enter__(self):
        with self.changed:
            self.came += 1
            self.changed.notify_all()
        self._lock.acquire()

    def __exit__(self, *exc):
        self._lock.release()


def test_requests_that_find_the_snapshot_stale_together_read_it_once(db):
    Database(db, "test").store().close()
    go = threading.Event()
    conns = Connections(lambda read_only: Held(Database(db, "test").store(read_only=read_only), go), 3.0,
                        clock=lambda: 1000.0)
    conns._read_lock = lock = Counted()  # to see every tab come to the reading, held by the first
    got = []
    threads = [threading.Thread(target=lambda: got.append(conns.snapshot())) for _ in range(TABS)]
    for t in threads:
        t.start()
    try:
        with lock.changed:
            assert lock.changed.wait_for(lambda: lock.came == TABS, 30), lock.came
    finally:
        go.set()
        for t in threads:
            t.join(30)
    conns.close()
    assert len(got) == TABS and all(snap is got[0] for snap in got)
    assert conns.reads["snapshot"] == 1 and sum(conns.reads.values()) == 1


def test_the_overviews_refreshes_read_the_queue_once_an_interval_whatever_the_tabs(db, tmp_path):
    dash = Dashboard(db, tmp_path, users=None, interval=60.0)
    try:
        for _ in range(3 * TABS):
            r = dash.get("/?part=live", user=None)
            assert r.status_code == 200, r.data[:300]
        reads = dict(dash.connections.reads)
        # One snapshot, the running jobs and the dead letter queue's newest read with it, each chart's span once.
        assert {k: reads.get(k, 0) for k in ("snapshot", "page", "history")} == {"snapshot": 1, "page": 2, "history": 3}
        assert dash.get("/jobs", user=None).status_code == 200  # a page of jobs reads what it shows
        assert dash.connections.reads["page"] == 3
        said = dash.connections.summary()
        assert re.fullmatch(r"read the queue 7 times in \d+ s: 1 snapshots \(at most one every 60 s\), 3 history"
                            r" spans, 3 page reads", said), said
    finally:
        dash.close()


def test_a_tab_that_shows_the_charts_already_gets_a_placeholder_not_the_charts_again(db, tmp_path):
    """The live part carries the charts' stamp (what they are drawn from); a refresh that names the stamp its tab
    shows gets a placeholder that the page's script swaps for the charts it has, until the data or the minute
    changes. The whole page always has the charts."""
    dash = Dashboard(db, tmp_path, users=None, interval=60.0)
    try:
        first = dash.get("/?part=live", user=None).data.decode()
        [stamp] = re.findall(r'<div class="charts" data-charts="([0-9a-f]{8})">', first)
        assert first.count("<svg") >= 9  # three spans: throughput, wait and run each
        kept = dash.get(f"/?part=live&charts={stamp}", user=None).data.decode()
        assert f'<div class="charts" data-charts="{stamp}" data-kept></div>' in kept and "<svg" not in kept
        assert len(kept) < len(first) / 2
        other = dash.get("/?part=live&charts=00000000", user=None).data.decode()
        assert other.count("<svg") == first.count("<svg")  # another tab's stamp: the charts
        whole = dash.get(f"/?charts={stamp}", user=None).data.decode()
        assert whole.count("<svg") == first.count("<svg")  # the page itself: always
    finally:
        dash.close()
