"""Disk full: the database on a small tmpfs that fills up mid-run, then gets space back.

While the filesystem is full: `enqueue` fails with one line naming the cause and exit 1,
and inserts nothing; workers log the error, keep their running jobs and the results of
the ones that end in memory, neither exit nor spin, and no worker declares another dead.
Once space is freed they record every result, and nothing that was acknowledged is lost.
Needs root (mount).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from support.cli import configure, queuectl
from support.waiting import wait_for
from queuectl.domain.models import JobState
from queuectl.store import SqliteStore

from .checks import cpu_seconds, integrity, require_privilege


OUTPUT = 2 * 1024 * 1024  # bytes each big job prints: more than the WAL holds before the disk fills


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    # Room, once the filler is gone, for the four results twice (in the WAL and, after a
    # checkpoint, in the database) and a job more: 16 MiB was not, and the last enqueue failed.
    require_privilege("mounting a small filesystem", ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs",
                                                      str(mnt)])
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt) -> int:
    """Write a filler file until the filesystem is full; return its size in bytes."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (1 << 16, 512):
            try:
                while os.write(fd, b"\0" * chunk):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return os.path.getsize(mnt / "filler")


def test_disk_full(small_fs, run_cli, workers, tmp_path, figures):
    db = str(small_fs / "queue.db")
    run_cli.db = workers.db = db
    configure(run_cli, ("heartbeat-interval", "1"), ("stale-after", "5"), ("poll-interval", "0.05"),
              ("output-limit", str(2 * OUTPUT)))
    store = SqliteStore(db)
    done = tmp_path / "done"  # outside the small filesystem
    done.mkdir()
    for i in range(4):
        command = f"sleep 3; head -c {OUTPUT} /dev/zero | tr '\\0' x; touch {done}/big{i}"
        r = queuectl(db, "enqueue", json.dumps({"id": f"big{i}", "command": command}), check=False)
        assert r.returncode == 0, r.stderr
    procs = [workers.start("--name", f"w{n}", "--count", "2") for n in range(2)]
    wait_for(lambda: store.counts()["default"].get("processing", 0) == 4, message="the four big jobs to run")

    filler = _fill(small_fs)
    full_at = time.monotonic()
    cpu_before = [cpu_seconds(p.pid) for p in procs]

    # A batch larger than the WAL can take without growing: all or none, and here none.
    batch = "\n".join(json.dumps({"id": f"batch{i}", "command": "true #" + "y" * 100_000}) for i in range(40))
    r = queuectl(db, "enqueue", "--file", "-", input=batch, check=False)
    assert r.returncode == 1, r
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("queuectl: error: ") and "full" in r.stderr, r.stderr
    assert not any(j.id.startswith("batch") for j in store.list_jobs(limit=1000))
    # A small enqueue may still find room in the WAL: then it is acknowledged and must run later.
    small = queuectl(db, "enqueue", json.dumps({"id": "small", "command": "true"}), check=False)
    assert (small.returncode == 0 and small.stdout == "small\n") or (
        small.returncode == 1 and small.stderr.count("\n") == 1 and "full" in small.stderr), small

    # The big jobs end while the disk is full: their results cannot be written.
    wait_for(lambda: len(os.listdir(done)) == 4, timeout=30,
             message=f"the big jobs' shells to end: {[workers.output(p) for p in procs]}")
    time.sleep(4)
    assert all(p.poll() is None for p in procs), [workers.output(p) for p in procs]
    unrecorded = store.counts()["default"].get("processing", 0)
    cpu_full = max(cpu_seconds(p.pid) - before for p, before in zip(procs, cpu_before))
    seconds_full = time.monotonic() - full_at
    error_lines = [line for p in procs for line in workers.output(p).splitlines() if "full" in line]

    os.unlink(small_fs / "filler")
    freed_at = time.monotonic()
    wait_for(lambda: store.counts()["default"].get("completed", 0) >= 4, timeout=60,
             message="the results to be recorded once space is back")
    recorded_after = time.monotonic() - freed_at
    if small.returncode == 0:
        wait_for(lambda: store.get_job("small").state == JobState.COMPLETED, message="the acknowledged small job")
    r = queuectl(db, "enqueue", json.dumps({"id": "after", "command": "true"}), check=False)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: store.get_job("after").state == JobState.COMPLETED, message="a job enqueued after")
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        assert p.wait(60) == 0, workers.output(p)
    logs = "".join(workers.output(p) for p in procs)

    figures.add("filesystem", f"tmpfs of 48 MiB, filled with {filler / 2**20:.1f} MiB")
    figures.add("full for", f"{seconds_full:.1f} s, results held in memory: {unrecorded} of 4")
    figures.add("most CPU a worker used while full", f"{cpu_full:.2f} s")
    figures.add("error lines logged while full", len(error_lines))
    figures.add("small enqueue while full", "acknowledged" if small.returncode == 0 else "refused")
    figures.add("results recorded after space came back", f"{recorded_after:.1f} s")

    assert unrecorded == 4  # nothing could be written; nothing was dropped either
    assert cpu_full < 0.25 * seconds_full, cpu_full  # retrying about once a second, not spinning
    assert 1 <= len(error_lines) <= 8, error_lines
    for i in range(4):
        job = store.get_job(f"big{i}", output=True)
        assert (job.state, job.attempts, job.exit_code) == (JobState.COMPLETED, 1, 0)
        assert job.stdout == b"x" * OUTPUT
    assert "recovered" not in logs and "declared dead" not in logs, logs
    assert "the database takes writes again" in logs
    store.close()
    assert integrity(db) == "ok"
