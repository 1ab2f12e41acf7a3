"""Tier 2: schedules and limits with real worker processes, on SQLite and PostgreSQL.

Each run and each job logs its id and its start (and end) time from the shell; the tests read
those logs: three workers fire every slot of `--every 2s` once, a worker stopped for five slots
gives one catch-up run, a concurrency limit of 2 holds across 4 workers x 4 slots while another
queue runs beside it at full speed, and a rate limit of 5/2s holds in every 2 s window.
"""

from __future__ import annotations

import json
import signal
from collections import Counter

from support.cli import enqueue
from support.jobs import slot_of
from support.waiting import wait_for
from support.workers import configure_fast, safe_path, wait_exit, worker_logs
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def logged(path) -> list[list[str]]:
    """The lines the jobs appended to `path`, split in words."""
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def stop_all(procs) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        assert wait_exit(p) == 0, worker_logs([p])


def add_schedule(run_cli, name, every, command, *options):
    r = run_cli("schedule", "add", name, "--every", every, *options, json.dumps({"command": command}))
    assert r.exit_code == 0, r.stderr


def test_three_workers_fire_each_slot_of_every_2s_once(db, run_cli, workers, tmp_path):
    configure_fast(run_cli)
    log = tmp_path / "runs.log"
    add_schedule(run_cli, "tick", "2s", f'echo "$QUEUECTL_JOB_ID $(date +%s.%N)" >> {safe_path(log)}',
                 "--overlap", "allow")
    procs = [workers.start("--name", f"w{n}") for n in range(3)]
    wait_for(lambda: len(logged(log)) >= 4, timeout=30, message=f"4 runs{worker_logs(procs)}")
    stop_all(procs)
    runs = logged(log)
    assert [i for i, n in Counter(r[0] for r in runs).items() if n > 1] == []  # no slot ran twice
    slots = sorted(slot_of(r[0]) for r in runs)
    assert [b - a for a, b in zip(slots, slots[1:])] == [2.0] * (len(slots) - 1), runs  # and none was left out
    for job_id, started in runs:
        assert float(started) >= slot_of(job_id) - 0.05, runs  # not before its slot (the clocks agree here)
    fired = sum(worker_logs([p]).count("schedule tick: slot") for p in procs)
    assert fired >= len(runs)  # each slot was logged by the worker that fired it


def test_a_worker_stopped_for_five_slots_gives_one_catch_up_run(db, run_cli, store, workers, tmp_path):
    configure_fast(run_cli)
    log = tmp_path / "runs.log"
    add_schedule(run_cli, "tick", "1s", f'echo "$QUEUECTL_JOB_ID" >> {safe_path(log)}', "--overlap", "allow")
    first = workers.start("--name", "w1")
    wait_for(lambda: logged(log), timeout=30, message=f"a first run{worker_logs([first])}")
    stop_all([first])
    before = {r[0] for r in logged(log)}
    stopped_at = store.clock()
    wait_for(lambda: store.clock() >= stopped_at + 5.5, timeout=10, message="five slots to pass")
    again = workers.start("--name", "w2")
    wait_for(lambda: len(logged(log)) > len(before), timeout=30, message=f"the catch-up run{worker_logs([again])}")
    stop_all([again])
    after = sorted(slot_of(r[0]) for r in logged(log) if r[0] not in before)
    catch_up, last_before = after[0], max(slot_of(i) for i in before)
    assert catch_up >= int(stopped_at) + 5, (after, stopped_at)  # no run for the five slots passed meanwhile ...
    assert "passed unfired" in worker_logs([again])  # ... but one run for them all, said so
    assert [b - a for a, b in zip(after, after[1:])] == [1.0] * (len(after) - 1)  # then each slot again
    assert catch_up - last_before >= 5


def _intervals(rows) -> list[tuple[float, float]]:
    starts = {r[0]: float(r[2]) for r in rows if r[1] == "start"}
    ends = {r[0]: float(r[2]) for r in rows if r[1] == "end"}
    assert set(starts) == set(ends)
    return [(starts[i], ends[i]) for i in starts]


def _most_at_once(intervals) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return most


def test_a_concurrency_limit_holds_across_workers_and_another_queue_runs_beside_it(db, run_cli, workers, tmp_path):
    configure_fast(run_cli)
    assert run_cli("limit", "build", "--concurrency", "2").exit_code == 0
    logs = {q: safe_path(tmp_path / f"{q}.log") for q in ("build", "other")}
    for q, n in (("build", 12), ("other", 24)):
        for i in range(n):
            enqueue(run_cli, id=f"{q}{i}", queue=q, command=f'echo "$QUEUECTL_JOB_ID start $(date +%s.%N)" >> {logs[q]};'
                                                             f' sleep 0.3; echo "$QUEUECTL_JOB_ID end $(date +%s.%N)"'
                                                             f' >> {logs[q]}')
    procs = [workers.start("--count", "4", "--burst", "--name", f"w{n}") for n in range(4)]
    for p in procs:
        assert wait_exit(p, 120) == 0, worker_logs([p])
    build, other = (_intervals(logged(tmp_path / f"{q}.log")) for q in ("build", "other"))
    assert (len(build), len(other)) == (12, 24)
    assert _most_at_once(build) <= 2  # never 3 at once, across 4 workers
    assert _most_at_once(other) >= 6, other  # the other queue used the slots build could not
    assert min(s for s, _ in other) < max(e for _, e in build)  # and ran while build did


def test_a_rate_limit_holds_in_every_window(db, run_cli, workers, tmp_path):
    configure_fast(run_cli)
    assert run_cli("limit", "mail", "--rate", "5/2s").exit_code == 0
    log = safe_path(tmp_path / "mail.log")
    for i in range(20):
        enqueue(run_cli, id=f"m{i}", queue="mail", command=f'echo "$QUEUECTL_JOB_ID $(date +%s.%N)" >> {log}')
    procs = [workers.start("--count", "4", "--burst", "--name", f"w{n}") for n in range(2)]
    for p in procs:
        assert wait_exit(p, 120) == 0, worker_logs([p])
    starts = sorted(float(r[1]) for r in logged(tmp_path / "mail.log"))
    assert len(starts) == 20
    worst = max(sum(s <= u <= s + 2.0 for u in starts) for s in starts)
    assert worst <= 5, starts
