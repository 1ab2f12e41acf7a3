"""Section 9 of bench/run.py: the dashboard (`queuectl web`) with a million jobs stored.

On the scale section's database (a million completed jobs in queue default), with DEAD dead jobs and a
week of activity history (WEEK_QUEUES queues, every minute; kept as the workers' retention keeps it: a
day of minutes, older ones rolled up into hours) added, `queuectl web` runs as a real process
on a free loopback port, and:

- pages: each of PAGES is fetched once (the first: nothing read yet, the history spans included), then
  `requests` more times on one kept-alive connection; the median and p95 of those, against the
  issue's bar for the overview (TARGET_MS);
- load: `clients` tabs (threads, each its own connection) fetch the overview's live part every second
  for `poll_s` seconds on a server of its own, at the default interval; the server says at its exit how
  often it read the queue (queuectl.web.reads.Connections.summary: the snapshot, the history spans and
  the other reads, each a call on its reading connection): at most one snapshot per interval is the target.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import statistics
import subprocess
import tempfile
import threading
import time

from run import ENV, QUEUECTL, fill, percentile  # bench/run.py, which imports this module in main()

from queuectl.store import open_store
from queuectl.store.base import MINUTES_KEPT
from queuectl.web.config import DEFAULT_INTERVAL

TARGET_MS = 300.0
DEAD = 1000
WEEK_QUEUES = ("default", "build", "mail", "reports")
#: (name, address): the pages timed; "{job}" is a stored job's id.
PAGES = (("overview", "/"), ("live part", "/?part=live"), ("jobs", "/jobs"), ("dead jobs", "/jobs?state=dead"),
         ("a job", "/jobs/{job}"), ("queues", "/queues"))
SUMMARY = re.compile(r"read the queue (\d+) times in \d+ s: (\d+) snapshots .*?, (\d+) history spans, (\d+) page reads")


def prepare(db: str) -> str:
    """Add DEAD dead jobs and a week of every minute's activity in WEEK_QUEUES to `db`, rolled up as retention
    does; return a stored job's id."""
    fill(db, DEAD, command="false", state="dead", prefix="dead")
    with open_store(db) as store:
        end = int(store.clock() // 60 * 60)
        minutes = [(q, end - 60 * i, 60, 59, 1, 0, 20, 59, 30.0, 120.0) for q in WEEK_QUEUES for i in range(7 * 1440)]
        store.c.executemany("INSERT INTO activity (queue, minute, started, completed, failed, dead, wait_3, run_6,"
                            " wait_sum, run_sum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", minutes)
        while store.purge_history(None, end - MINUTES_KEPT):
            pass
        return store.c.execute("SELECT id FROM jobs WHERE state = 'completed' ORDER BY seq LIMIT 1").fetchone()[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(db: str):
    """Yield (port, said) of `queuectl web` serving `db` on a free loopback port, ready; on leaving, stop it
    (SIGTERM) and fill `said` (a dict) with its exit line's counts: reads, snapshot, history, page."""
    port, said = free_port(), {}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([*QUEUECTL, "--db", db, "web", "--bind", f"127.0.0.1:{port}"], env=ENV,
                                stdout=log, stderr=log)
        try:
            wait_ready(proc, port)
            yield port, said
        finally:
            proc.terminate()
            code = proc.wait(30)
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
        match = SUMMARY.search(text)
        if code != 0 or match is None:
            raise RuntimeError(f"queuectl web exited {code} without its counts:\n{text[-2000:]}")
        said.update(zip(("reads", "snapshot", "history", "page"), map(int, match.groups())))


def wait_ready(proc: subprocess.Popen, port: int, timeout: float = 30.0) -> None:
    """Return once the server answers a request that reads nothing (its stylesheet)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"queuectl web exited {proc.returncode} at start")
        try:
            status, _ = get(http.client.HTTPConnection("127.0.0.1", port, timeout=5), "/static/style.css")
            if status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("queuectl web did not answer")
        time.sleep(0.05)


def get(conn: http.client.HTTPConnection, path: str) -> tuple[int, float]:
    """GET `path` on `conn` and read the whole answer: (status, seconds)."""
    start = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    response.read()
    return response.status, time.perf_counter() - start


def page_times(port: int, job: str, n: int) -> dict:
    """Each of PAGES: the first answer's time, then the median and p95 of `n` more (ms)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    out = {}
    try:
        for name, path in PAGES:
            path = path.format(job=job)
            times = []
            for _ in range(n + 1):
                status, seconds = get(conn, path)
                if status != 200:
                    raise RuntimeError(f"GET {path} answered {status}")
                times.append(seconds * 1000)
            first, rest = times[0], sorted(times[1:])
            out[name] = {"path": path, "first_ms": first, "p50_ms": statistics.median(rest),
                         "p95_ms": percentile(rest, 0.95)}
    finally:
        conn.close()
    return out


def polled(db: str, clients: int, seconds: float) -> dict:
    """`clients` tabs polling the overview's live part every second for `seconds` on a new server: its reads of
    the queue (from its exit line) against the bound of one snapshot per interval, and the answers' times."""
    times: list[float] = []
    failures: list[str] = []
    with server(db) as (port, said):
        start = time.monotonic()
        stop = start + seconds

        def tab(offset: float) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            tick = start + offset
            try:
                while tick < stop:
                    time.sleep(max(0.0, tick - time.monotonic()))
                    status, took = get(conn, "/?part=live")
                    (times if status == 200 else failures).append(took * 1000 if status == 200 else str(status))
                    tick += 1.0
            except OSError as e:
                failures.append(str(e))
            finally:
                conn.close()

        threads = [threading.Thread(target=tab, args=(i / clients,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
    if failures:
        raise RuntimeError(f"{len(failures)} polls failed: {failures[:3]}")
    times.sort()
    interval = DEFAULT_INTERVAL
    return {"clients": clients, "seconds": elapsed, "interval_s": interval, "requests": len(times),
            "snapshot_reads": said["snapshot"], "history_reads": said["history"], "page_reads": said["page"],
            # From the first read, one more each full interval: the most that "one per interval" allows.
            "snapshot_bound": int(elapsed // interval) + 1, "p50_ms": statistics.median(times),
            "p95_ms": percentile(times, 0.95)}


def dashboard(db: str, stored: int, size: dict) -> dict:
    """The figures of this section on `db`, the scale section's database of `stored` completed jobs."""
    job = prepare(db)
    with server(db) as (port, said):
        pages = page_times(port, job, size["web_requests"])
    return {"stored": stored, "dead": DEAD, "history_queues": len(WEEK_QUEUES), "requests": size["web_requests"],
            "target_ms": TARGET_MS, "pages": pages, "server_reads": said,
            "load": polled(db, size["web_clients"], size["web_poll_s"])}


def rows(d: dict, engine: str = "", sqlite: dict | None = None) -> list[tuple[str, str, str]]:
    """The summary's lines of this section (`sqlite`: SQLite's figures, beside PostgreSQL's)."""
    out = []
    for name, p in d["pages"].items():
        note = f"first {p['first_ms']:.0f} ms"
        if name == "overview":
            note += f"; target <= {d['target_ms']:.0f} ms"
        if sqlite is not None:
            s = sqlite["pages"][name]
            note += f"; SQLite {s['p50_ms']:.0f} / {s['p95_ms']:.0f} ms"
        out.append((f"{engine}web {name} p50 / p95, {d['stored']:,} stored", f"{p['p50_ms']:.0f} / {p['p95_ms']:.0f} ms",
                    note))
    load = d["load"]
    out.append((f"{engine}web: {load['clients']} tabs polling the live part, {load['seconds']:.0f} s",
                f"{load['snapshot_reads']} snapshot reads",
                f"target <= {load['snapshot_bound']} (one per {load['interval_s']:g} s); {load['history_reads']} history,"
                f" {load['page_reads']} page reads; p50 / p95 {load['p50_ms']:.0f} / {load['p95_ms']:.0f} ms"))
    return out
