"""Workers of two slots draining one queue of logged jobs (tests/chaos/load.py), and what a test checks at the end:
the chaos tier's fault tests on PostgreSQL (test_postgres_faults.py on the session's server, test_failover.py on a
primary and its standby)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from urllib.parse import unquote, urlsplit

from support.cli import configure
from support.waiting import wait_for

from .checks import integrity
from .load import RunLog

#: Heartbeats every second; a worker silent for 10 s is stale: well inside the storm's and the
#: outage's length, so that a recovery that should not happen would. (The restarts, each a second
#: or so, run at the defaults.)
SETTINGS = (("heartbeat-interval", "1"), ("stale-after", "10"), ("poll-interval", "0.1"))
#: Another host, as a worker sees it: a hostname and a boot id of its own (so another clock domain).
FAR_HOST = "far-host"


class Fleet:
    """Workers of two slots draining one queue of logged jobs; what a test checks at the end."""

    def __init__(self, db: str, pg_server, run_cli, workers, tmp_path):
        self.db, self.server, self.run_cli, self.workers = db, pg_server, run_cli, workers
        self.dbname = unquote(urlsplit(db).path[1:])  # (a URI may have a query: target_session_attrs)
        self.log = RunLog(tmp_path)
        self.tmp_path = tmp_path
        self.procs: dict[str, subprocess.Popen] = {}
        self.ids: list[str] = []
        self.fds_before: dict[str, int] = {}
        configure(run_cli, *SETTINGS)

    # -- reading the queue behind queuectl's back (a plain connection that no storm terminates) ----

    def sql(self, statement: str, params=None) -> list[tuple]:
        return self.server.sql(statement, dbname=self.dbname, params=params)

    def states(self) -> dict[str, int]:
        return dict(self.sql("SELECT state, count(*) FROM queuectl.jobs GROUP BY state"))

    def beats(self) -> dict[str, int]:
        return dict(self.sql("SELECT name, beats FROM queuectl.workers"))

    # -- workers -------------------------------------------------------------------------------------

    def start(self, name: str, *args: str, far: bool = False) -> subprocess.Popen:
        """Start worker `name` (two slots); `far`: as another host (needs root: namespaces and a mount)."""
        wrapper = far_host(self.tmp_path) if far else ()
        self.procs[name] = self.workers.start("--name", name, "--count", "2", *args, wrapper=wrapper)
        return self.procs[name]

    def settle(self) -> None:
        """Wait until every worker has beaten twice (so it listens), then count each one's descriptors."""
        wait_for(lambda: sorted(n for n, b in self.beats().items() if b >= 2) == sorted(self.procs), timeout=30,
                 message=f"the workers to register and beat: {self.logs()}")
        self.fds_before = {name: fd_count(p.pid) for name, p in self.procs.items()}

    def drain(self, prefix: str, count: int, settings=()) -> float:
        """Start workers w0 and w1, make `settings`, enqueue `count` jobs of 0 to 50 ms; return when (monotonic)."""
        for n in range(2):
            self.start(f"w{n}")
        self.settle()
        configure(self.run_cli, *settings)  # the workers read them at their next heartbeat
        started = time.monotonic()
        self.enqueue(self.log.jobs([f"{prefix}{i:05d}" for i in range(count)], max_ms=50))
        return started

    def enqueue(self, jobs: list[dict]) -> None:
        r = self.run_cli("enqueue", "--file", "-", input="".join(json.dumps(j) + "\n" for j in jobs))
        assert r.exit_code == 0, r.stderr
        self.ids += [j["id"] for j in jobs]

    def completed(self) -> int:
        return self.states().get("completed", 0)

    def wait_drained(self, timeout: float) -> None:
        wait_for(lambda: self.completed() == len(self.ids), timeout=timeout, interval=0.2,
                 message=f"every job to complete: {self.states()}{self.logs()}")

    def logs(self) -> str:
        return "".join(f"\n--- worker {n} ---\n{self.workers.output(p)[-3000:]}" for n, p in self.procs.items())

    def outage_lengths(self) -> list[float]:
        """Every outage a worker logged the end of: seconds from its first failed write to the next success."""
        return [float(s) for s in re.findall(r"takes writes again after ([0-9.]+) s", self.logs_in_full())]

    def logs_in_full(self) -> str:
        return "".join(self.workers.output(p) for p in self.procs.values())

    # -- the end: the checks every fault test makes ----------------------------------------------------

    def check(self, figures) -> None:
        """Every job completed once, no overlap, nothing stuck, no leak; the workers alive, then drained."""
        alive = {name: p.poll() is None for name, p in self.procs.items()}
        fds = {}
        if all(alive.values()):  # idle now, and listening again (each heartbeat reopens a broken LISTEN)
            try:
                wait_for(lambda: fds.update({n: fd_count(p.pid) for n, p in self.procs.items()})
                         or all(fds[n] <= self.fds_before[n] for n in fds), timeout=10)
            except AssertionError:
                pass  # reported and asserted below
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = {name: p.wait(60) for name, p in self.procs.items()}
        runs = self.log.read()
        logs = self.logs_in_full()
        attempts = dict(self.sql("SELECT attempts, count(*) FROM queuectl.jobs GROUP BY attempts"))
        lengths = self.outage_lengths()

        figures.add("jobs", len(self.ids))
        figures.add("runs started / reruns / cut short", f"{runs.starts} / {runs.reruns()} / {runs.unfinished}")
        figures.add("jobs by attempts", attempts)
        figures.add("overlapping runs", len(runs.overlapping()))
        figures.add("outages the workers logged, longest (first failure to next write)",
                    f"{len(lengths)}, {max(lengths, default=0):.1f} s")
        figures.add("descriptors per worker, before / after", {n: (self.fds_before.get(n), fds.get(n)) for n in alive})
        figures.add("workers alive at the end, exit codes", f"{alive}, {codes}")

        assert all(alive.values()), f"a worker exited: {alive} {codes}{self.logs()}"
        assert codes == dict.fromkeys(self.procs, 0), (codes, self.logs())
        assert self.states() == {"completed": len(self.ids)}, self.states()  # nothing pending, processing, failed
        assert runs.finished() == sorted(self.ids)  # every job ran to its end
        assert runs.reruns() == 0 and attempts == {1: len(self.ids)}, (runs.reruns(), attempts)
        assert runs.overlapping() == [], runs.overlapping()[:5]
        assert "recovered job" not in logs and "declared dead" not in logs and "result is dropped" not in logs, logs
        assert all(fds[n] <= self.fds_before[n] for n in self.procs), (self.fds_before, fds)
        assert integrity(self.db) == "ok"


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def far_host(tmp_path) -> tuple[str, ...]:
    """A wrapper (it execs its arguments) that runs a command as another host: in namespaces of its own,
    with hostname FAR_HOST and a boot id of its own bound over /proc's. Needs root, and a machine that
    allows the bind mount over /proc (systemd-nspawn's containers do not)."""
    boot = tmp_path / "far-boot-id"
    boot.write_text("0f0f0f0f-0000-4000-8000-00000000000f\n")
    return ("unshare", "--uts", "--mount", "sh", "-c",
            f'hostname {FAR_HOST} && mount --bind {boot} /proc/sys/kernel/random/boot_id && exec "$@"', "sh")
