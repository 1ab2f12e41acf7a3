"""The multihost tier (`pytest -m multihost`): two hosts, as two systemd-nspawn containers, share one queue.

Host A and host B are booted in parallel from overlays of this machine's root
(tests/system/container.py), each with a hostname (host-a, host-b), a PID namespace and a
boot id of its own: systemd-nspawn bind-mounts a fresh random file over
/proc/sys/kernel/random/boot_id by itself. They share this machine's network, so their
workers reach the session's PostgreSQL server (tests/support/pgserver.py) on 127.0.0.1, and
this test process reaches it too: it enqueues, configures and reads jobs from outside both
hosts. queuectl runs inside from this source tree with Debian's python3
(/usr/local/bin/queuectl), each worker as a transient systemd unit (`systemd-run`,
Type=notify: it returns once the worker has registered). One directory of this machine is
bind-mounted at the same path in both hosts; the jobs (JOB_SCRIPT) log their runs there,
one file per host, and the tests read it directly.

Needs root, systemd-nspawn, Debian's python3 with click, sdnotify, daemon and psycopg,
flock, and the PostgreSQL server binaries: skipped with the reason otherwise, failed under
CI=true. QUEUECTL_MULTIHOST_DB=sqlite runs the tier (all but the database restart) on one
SQLite file in the shared directory instead: a check of the harness itself, not a
supported deployment.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from support.cli import queuectl, status
from support.waiting import wait_for
from system.container import Container, boot_all, debian_python_missing, install_source, missing_prerequisites

TIER = "multihost"
HOST_NAMES = ("host-a", "host-b")
QUEUECTL = "/usr/local/bin/queuectl"  # the launcher inside each host
PYTHON_MODULES = ("click", "sdnotify", "daemon", "croniter", "psycopg")
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#: Liveness settings for tests that wait for a recovery: a lost worker's jobs come back 6 s after its last sign.
FAST_LIVENESS = {"heartbeat-interval": "1", "stale-after": "6", "poll-interval": "0.2"}

JOB_SCRIPT = r"""#!/bin/sh
# One run of a multihost test job: sh job.sh DIR SECONDS [FIRST_OK_ATTEMPT]
# It holds an flock on DIR/locks/ID while it runs, so a second copy running at the same
# time, on either host, logs "ID HOST ATTEMPT overlap T" to DIR/overlaps and fails. It
# appends "ID HOST ATTEMPT START END" to DIR/HOST.log, the times in seconds since boot
# (/proc/uptime: one clock for both hosts, which libfaketime leaves alone), then fails
# while ATTEMPT < FIRST_OK_ATTEMPT (default 1: it succeeds at once).
dir=$1 seconds=$2 ok_from=${3:-1}
host=$(hostname)
now() { read -r up _ < /proc/uptime; echo "$up"; }
exec 9>>"$dir/locks/$QUEUECTL_JOB_ID"
if ! flock -n 9; then
    echo "$QUEUECTL_JOB_ID $host $QUEUECTL_ATTEMPT overlap $(now)" >> "$dir/overlaps"
    exit 1
fi
start=$(now)
sleep "$seconds"
echo "$QUEUECTL_JOB_ID $host $QUEUECTL_ATTEMPT $start $(now)" >> "$dir/$host.log"
[ "$QUEUECTL_ATTEMPT" -ge "$ok_from" ]
"""

_units = itertools.count(1)


def multihost_missing() -> str | None:
    """Why this machine cannot run the tier (the package that fixes it), or None."""
    return (missing_prerequisites() or debian_python_missing(PYTHON_MODULES)
            or (None if shutil.which("flock") else "flock is missing (apt-get install util-linux)"))


# -- runs: what the jobs logged ----------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One run of a job as JOB_SCRIPT logged it; start and end in seconds since boot."""

    job: str
    host: str
    attempt: int
    start: float
    end: float


class Runs:
    """A test's directory in the shared one: JOB_SCRIPT's commands for it, and what they logged."""

    def __init__(self, path: Path):
        self.path = path
        (path / "locks").mkdir(parents=True)

    def command(self, seconds: float = 0, ok_from: int = 1) -> str:
        """A job that runs `seconds` and fails its attempts before `ok_from`, logging each run."""
        return f"sh {self.path.parent / 'job.sh'} {self.path} {seconds:g} {ok_from}"

    def all(self) -> list[Run]:
        runs = []
        for log in sorted(self.path.glob("*.log")):
            for line in log.read_text().splitlines():
                job, host, attempt, start, end = line.split()
                runs.append(Run(job, host, int(attempt), float(start), float(end)))
        return runs

    def overlaps(self) -> list[str]:
        """Runs that found another copy of their job running (JOB_SCRIPT's flock)."""
        try:
            return (self.path / "overlaps").read_text().splitlines()
        except FileNotFoundError:
            return []


def overlapping(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs of one job whose [start, end] intervals intersect."""
    by_job: dict[str, list[Run]] = {}
    for r in runs:
        by_job.setdefault(r.job, []).append(r)
    pairs = []
    for job_runs in by_job.values():
        job_runs.sort(key=lambda r: r.start)
        pairs += [(a, b) for a, b in zip(job_runs, job_runs[1:]) if b.start < a.end]
    return pairs


# -- hosts ----------------------------------------------------------------------------------------


class Host:
    """One simulated host: a container, the worker units started in it, the processes made in it."""

    def __init__(self, name: str, shared: Path):
        self.name = name
        self.shared = shared
        self.container: Container | None = None
        self.units: list[str] = []
        self.pids: list[int] = []  # made by spawn_group, in this host's PID namespace

    def new_container(self) -> Container:
        self.container = Container(self.name, [f"--bind={self.shared}"])
        self.units, self.pids = [], []
        return self.container

    def alive(self) -> bool:
        return self.container is not None and self.container.alive()

    def run(self, *cmd: str, **kw) -> subprocess.CompletedProcess:
        return self.container.run(*cmd, **kw)

    def queuectl(self, db: str, *args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
        """Run queuectl inside this host (no site configuration file), with `env` added."""
        return self.run(QUEUECTL, "--db", db, *args, env={"QUEUECTL_CONFIG": "", **(env or {})}, **kw)

    def status(self, db: str, env: dict | None = None) -> dict:
        return json.loads(self.queuectl(db, "status", "--json", env=env).stdout)

    def start_worker(self, db: str, name: str, count: int = 2, env: dict | None = None) -> str:
        """Start `queuectl worker start --name NAME --count COUNT` as a transient unit; return the unit.

        Type=notify: this returns once the worker has registered (its READY=1).
        """
        unit = f"qw{next(_units)}-{name}.service"
        setenv = [f"--setenv={k}={v}" for k, v in {"QUEUECTL_CONFIG": "", "QUEUECTL_UNIT": unit, **(env or {})}.items()]
        proc = self.run("systemd-run", f"--unit={unit}", f"--description=queuectl worker {name}",
                        "-p", "Type=notify", "-p", "NotifyAccess=main", *setenv,
                        QUEUECTL, "--db", db, "worker", "start", "--name", name, "--count", str(count),
                        check=False, timeout=120)
        self.units.append(unit)
        if proc.returncode != 0:
            raise AssertionError(f"worker {name} did not start on {self.name}: {proc.stderr}\n{self.journal(unit)}")
        return unit

    def signal(self, unit: str, sig: str, whom: str = "main") -> None:
        """`systemctl kill --kill-whom=WHOM -s SIG UNIT` (main: the worker itself, not its jobs)."""
        self.run("systemctl", "kill", f"--kill-whom={whom}", "-s", sig, unit)

    def main_pid(self, unit: str) -> int:
        return int(self.container.show(unit, "MainPID")["MainPID"])

    def journal(self, unit: str) -> str:
        return self.container.journal(unit)

    def journals(self) -> str:
        """Every worker unit's journal on this host, each under a header line."""
        return "".join(f"--- {self.name} {u}\n{self.journal(u)}" for u in self.units)

    def spawn_group(self, pgid: int, leader: bool = True, attempts: int = 5) -> int:
        """Make process group `pgid` in this host's PID namespace, a `sleep 600` in it; return the sleep's pid.

        `leader`: the sleep is process `pgid` itself (its group's and session's leader).
        Otherwise a shell of that pid starts the sleep in its new session and exits: the
        group lives on without its leader, as a job's group does when its shell has exited
        and a child still runs, and no leader's start time tells it from the recorded one.
        ns_last_pid is written just before the fork. Not through the container's /proc/sys,
        which systemd-nspawn mounts read-only: from a shell that entered only the host's PID
        namespace (the write applies to the writer's namespace), with this machine's /proc.
        Where this machine is itself a container, its /proc/sys is a read-only mount too: the
        shell remounts it writable in a mount namespace of its own (a no-op on a real host).
        """
        start = ("setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! $!" if leader else
                 "setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 & echo $$ $!' </dev/null")
        for _ in range(attempts):
            proc = subprocess.run(
                ["nsenter", "-t", str(self.container.leader), "-p", "unshare", "-m", "sh", "-c",
                 "mount -o remount,bind,rw /proc/sys 2>/dev/null;"
                 f" echo {pgid - 1} > /proc/sys/kernel/ns_last_pid; {start}"],
                capture_output=True, text=True, check=True, timeout=30)
            group, sleeper = map(int, proc.stdout.split())
            self.pids.append(sleeper)
            if group == pgid:
                wait_for(lambda: (self.process(sleeper) or (0, 0, ""))[2] == "S", timeout=10,
                         message=f"process {sleeper} on {self.name} to sleep")
                return sleeper
            self.run("kill", "-KILL", str(sleeper), check=False)  # another fork came first: again
        raise AssertionError(f"could not make process group {pgid} on {self.name}")

    def process(self, pid: int) -> tuple[int, int, str] | None:
        """(process group, start time, state) of process `pid` in this host's PID namespace, or None."""
        proc = self.run("cat", f"/proc/{pid}/stat", check=False)
        if proc.returncode != 0:
            return None
        fields = proc.stdout.rsplit(")", 1)[1].split()
        return int(fields[2]), int(fields[19]), fields[0]

    def identity(self, unit: bool = False, properties: tuple[str, ...] = ()) -> dict[str, str]:
        """hostname, boot id and PID namespace seen by a shell here (or by a transient unit's process)."""
        script = "hostname; cat /proc/sys/kernel/random/boot_id; readlink /proc/self/ns/pid"
        prefix = ["systemd-run", "--wait", "--pipe", "--quiet", *(f"--property={p}" for p in properties)] if unit else []
        hostname, boot_id, pid_ns = self.run(*prefix, "sh", "-c", script).stdout.split()
        return {"hostname": hostname, "boot_id": boot_id, "pid_ns": pid_ns}

    def reset(self) -> None:
        """SIGKILL every worker unit started here (jobs included) and every process spawned here."""
        if not self.alive():
            return
        for unit in self.units:
            self.run("systemctl", "kill", "-s", "SIGKILL", unit, check=False)
        for unit in self.units:
            self.run("systemctl", "stop", unit, check=False, timeout=60)
            self.run("systemctl", "reset-failed", unit, check=False)
        for pid in self.pids:
            self.run("kill", "-KILL", str(pid), check=False)
        self.units, self.pids = [], []


class Cluster:
    """Host A and host B, and the directory of this machine that both see at the same path."""

    def __init__(self):
        self.shared = Path(tempfile.mkdtemp(prefix="qmh.", dir="/var/tmp"))
        self.shared.chmod(0o755)
        (self.shared / "job.sh").write_text(JOB_SCRIPT)
        self.hosts = [Host(name, self.shared) for name in HOST_NAMES]
        self.boot_seconds: list[float] = []

    @property
    def a(self) -> Host:
        return self.hosts[0]

    @property
    def b(self) -> Host:
        return self.hosts[1]

    def ensure(self) -> None:
        """Boot (in parallel) every host not running: all at first, later those a test killed."""
        down = [h for h in self.hosts if not h.alive()]
        if not down:
            return
        for h in down:
            if h.container is not None:
                h.container.teardown()
        started = time.monotonic()
        boot_all([h.new_container() for h in down])
        self.boot_seconds.append(round(time.monotonic() - started, 1))
        for h in down:
            install_source(h.container, QUEUECTL)

    def reset(self) -> None:
        for h in self.hosts:
            h.reset()

    def teardown(self) -> None:
        for h in self.hosts:
            if h.container is not None:
                h.container.teardown()
        shutil.rmtree(self.shared, ignore_errors=True)


# -- the queue, from this process -------------------------------------------------------------------


def configure(db: str, settings: dict[str, str]) -> None:
    for key, value in settings.items():
        queuectl(db, "config", "set", key, value)


def enqueue(db: str, jobs: list[dict]) -> None:
    """`queuectl enqueue --file -` of `jobs` (JSON lines), from this process."""
    queuectl(db, "enqueue", "--file", "-", input="".join(json.dumps(j) + "\n" for j in jobs), timeout=120)


def wait_completed(db: str, count: int, timeout: float) -> dict:
    """Wait until `count` jobs completed; return the status then (fail with it after `timeout`)."""
    last = {}

    def done():
        last.update(status(db))
        return last["jobs"]["completed"] >= count

    try:
        wait_for(done, timeout=timeout, interval=0.5, message=f"{count} completed jobs")
    except AssertionError as e:
        raise AssertionError(f"{e}: {last.get('jobs')}") from None
    return last


def sql(db: str, statement: str, params: tuple = ()) -> list[tuple]:
    """Run one statement on the queue's database directly (%s placeholders); its rows."""
    if db.startswith(("postgresql://", "postgres://")):
        import psycopg

        # The PostgreSQL store keeps its tables in the schema "queuectl".
        with psycopg.connect(db, autocommit=True, connect_timeout=10,
                             options="-c search_path=queuectl,public") as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description is not None else []
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(statement.replace("%s", "?"), params).fetchall()
    finally:
        conn.close()


def faketime_env(offset: str) -> dict[str, str]:
    """Environment that preloads libfaketime with the wall clock `offset` ahead ("+1h"), monotonic clocks real."""
    return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
