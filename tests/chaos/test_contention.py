"""Enqueue contention: 8 producers of 1,000 jobs each while 2 workers drain and a reader loops.

Each producer runs real `queuectl enqueue` processes: 50 single enqueues and 19 `--file`
batches of 50 jobs. Meanwhile 2 workers of 2 slots drain the queue and a reader runs
`queuectl status` and `queuectl list` in a loop. Every enqueue that exited 0 must run
exactly once; none may fail with "database is locked" (the busy timeout must absorb the
contention), and any failure at all must be one line.
"""

from __future__ import annotations

import json
import signal
import statistics
import threading
import time
from collections import Counter


from support.cli import configure, timed
from support.waiting import wait_for

from .checks import integrity


PRODUCERS = 8
SINGLES = 50
BATCHES, BATCH = 19, 50
PER_PRODUCER = SINGLES + BATCHES * BATCH  # 1,000


def test_enqueue_contention(db, run_cli, store, workers, tmp_path, figures):
    configure(run_cli, ("heartbeat-interval", "0.5"), ("poll-interval", "0.05"))
    out = tmp_path / "ran.txt"
    drainers = [workers.start("--name", f"d{n}", "--count", "2") for n in range(2)]
    wait_for(lambda: len(store.workers()) == 2, message="both workers to register")

    accepted: list[str] = []
    failures: list[str] = []
    single_latency: list[float] = []
    lock = threading.Lock()

    def job(p: int, i: int) -> dict:
        job_id = f"p{p}-{i:04d}"
        return {"id": job_id, "command": f"echo {job_id} >> {out}"}

    def producer(p: int) -> None:
        i = 0
        plan = ["single"] * SINGLES + ["batch"] * BATCHES
        for step, kind in enumerate(plan[::2] + plan[1::2]):  # singles and batches interleaved
            if kind == "single":
                jobs = [job(p, i)]
                proc, took = timed(db, "enqueue", json.dumps(jobs[0]), timeout=120)
            else:
                jobs = [job(p, i + k) for k in range(BATCH)]
                proc, took = timed(db, "enqueue", "--file", "-", input="\n".join(json.dumps(j) for j in jobs),
                                   timeout=120)
            i += len(jobs)
            with lock:
                if proc.returncode == 0:
                    assert proc.stdout.split() == [j["id"] for j in jobs]
                    accepted.extend(j["id"] for j in jobs)
                    if kind == "single":
                        single_latency.append(took)
                else:
                    failures.append(f"exit {proc.returncode}: {proc.stderr!r}")

    reads = {"status": 0, "list": 0}
    reader_errors: list[str] = []
    stop_reading = threading.Event()

    def reader() -> None:
        while not stop_reading.is_set():
            for command in (["status", "--json"], ["list", "--limit", "20"]):
                proc, _ = timed(db, *command, timeout=120)
                reads[command[0]] += 1
                if proc.returncode != 0:
                    reader_errors.append(f"{command[0]} exit {proc.returncode}: {proc.stderr!r}")

    started = time.monotonic()
    threads = [threading.Thread(target=producer, args=(p,)) for p in range(PRODUCERS)]
    read_thread = threading.Thread(target=reader)
    read_thread.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    enqueue_time = time.monotonic() - started
    wait_for(lambda: store.counts().get("default", {}).get("completed", 0) == len(accepted), timeout=300,
             message="every accepted job to complete")
    drain_time = time.monotonic() - started
    stop_reading.set()
    read_thread.join()
    for d in drainers:
        d.send_signal(signal.SIGTERM)
    for d in drainers:
        assert d.wait(60) == 0, workers.output(d)

    ran = Counter(out.read_text().split())
    worker_logs = "".join(workers.output(d) for d in drainers)
    figures.add("jobs enqueued", f"{len(accepted)} by {PRODUCERS} producers")
    figures.add("enqueue processes", PRODUCERS * (SINGLES + BATCHES))
    figures.add("all enqueued after", f"{enqueue_time:.1f} s; all run after {drain_time:.1f} s")
    figures.add("single enqueue p50 / p99 under load",
                f"{statistics.median(single_latency) * 1000:.0f} / "
                f"{sorted(single_latency)[int(len(single_latency) * 0.99)] * 1000:.0f} ms")
    figures.add("status / list runs meanwhile", f"{reads['status']} / {reads['list']}")
    figures.add("failed enqueues / reads", f"{len(failures)} / {len(reader_errors)}")

    assert failures == [] and reader_errors == [], (failures[:3], reader_errors[:3])
    assert len(accepted) == PRODUCERS * PER_PRODUCER
    assert set(ran) == set(accepted) and all(n == 1 for n in ran.values()), ran.most_common(3)
    assert "locked" not in worker_logs, worker_logs[-2000:]
    assert integrity(db) == "ok"
