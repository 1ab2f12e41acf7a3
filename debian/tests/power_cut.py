#!/usr/bin/python3
"""The power-cut test's bookkeeping (debian/tests/power-cut runs it; not a test of its own).

    power_cut.py jobs DIR N       write DIR/jobs.jsonl: N jobs whose command waits for GATE, then records
                                  each run in a file of its own (DIR/runs/ID, a line a run, fsynced),
                                  DIR/late.jsonl: N more to enqueue one at a time during the drain, and
                                  make those files
    power_cut.py seen DIR         write DIR/seen: the ids `queuectl list` shows completed now, fsynced
    power_cut.py prune DIR        remove the empty run files of jobs the queue does not have (late jobs not
                                  enqueued before the cut), so that every run file left names a job
    power_cut.py check DIR SLOTS  after the cut and the drain: print the report, exit 1 if a promise broke

`queuectl` is run as it is found on PATH, with the environment given (QUEUECTL_DB names the engine's queue).
The promise checked (docs/semantics.md, Durability): every job whose enqueue exited 0 is there, every job
ends completed with no hand, every completion a reader saw before the cut stays completed with its one
run, every run is an attempt the queue counts (a job runs again only if a worker held it at the cut, and
its recovery counted it), and the jobs that run again are at most those the workers held: (1 +
PREFETCH_PER_SLOT) x slots a worker.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

#: The file every job waits for before it records its run. It lives in /run (a tmpfs), so the cut takes it:
#: after boot the jobs the workers claim wait, lightly, until the test's second half (autopkgtest's shell is
#: back by then) makes it again. Under TCG a guest draining at full speed as it boots starves the shell
#: autopkgtest sets up then, which it allows 10 s to mount its shared folder (a testbed failure).
GATE = "/run/queuectl-power-cut-go"


def queuectl(*args: str):
    return json.loads(subprocess.run(["queuectl", *args, "--json"], check=True, capture_output=True,
                                     text=True).stdout)


def fsynced(path: Path, text: str) -> None:
    """Write `text` to `path` and fsync the file and its folder."""
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def job(home: Path, job_id: str) -> str:
    """The job `job_id` as a JSON line, its run file made (empty, not fsynced)."""
    runs = home / "runs"
    runs.mkdir(exist_ok=True)
    (runs / job_id).touch()
    # The run is on disk before the job exits, so the worker can only record an end after it.
    return json.dumps({"id": job_id, "command": f'while [ ! -e {GATE} ]; do sleep 0.5; done; '
                                                 f'f={runs}/"$QUEUECTL_JOB_ID"; echo run >> "$f"; sync "$f"'})


def jobs(home: Path, n: int) -> None:
    fsynced(home / "jobs.jsonl", "".join(job(home, f"{home.name}-{i}") + "\n" for i in range(n)))
    fsynced(home / "late.jsonl", "".join(job(home, f"{home.name}-late-{i}") + "\n" for i in range(n)))
    os.sync()


def seen(home: Path) -> None:
    completed = [job["id"] for job in queuectl("list", "--state", "completed", "--limit", "1000000000")]
    fsynced(home / "seen", "".join(f"{job_id}\n" for job_id in completed))


def prune(home: Path) -> None:
    listed = {job["id"] for job in queuectl("list", "--limit", "1000000000")}
    for path in (home / "runs").iterdir():
        if path.name not in listed and path.stat().st_size == 0:  # a late job not enqueued before the cut
            path.unlink()


def check(home: Path, slots: int) -> int:
    from queuectl.worker.claims import PREFETCH_PER_SLOT  # the installed package's rule, not a copy

    listed = {job["id"]: job for job in queuectl("list", "--limit", "1000000000")}
    # Enqueued before the drain (`enqueue --file` exited 0), and one at a time during it (each id logged,
    # fsynced, once its `enqueue` had exited 0).
    acked = [json.loads(line)["id"] for line in (home / "jobs.jsonl").read_text().splitlines()]
    acked += (home / "acked").read_text().split() if (home / "acked").exists() else []
    seen_ids = (home / "seen").read_text().split()
    runs = {path.name: len(path.read_text().splitlines()) for path in (home / "runs").iterdir()}

    lost = [j for j in acked if j not in listed]
    stuck = sorted(j for j, job in listed.items() if job["state"] != "completed")
    never_ran = sorted(j for j in listed if runs.get(j, 0) == 0)
    unknown = sorted(j for j in runs if j not in listed)  # ran, yet the queue has no such job
    # Each run is an attempt the queue counts: a job held by a worker at the cut was recovered after boot
    # with an attempt (`worker lost`). More runs than attempts is a run whose claim the cut made the queue
    # forget (a claim committed without a sync), and with it perhaps its end.
    unaccounted = sorted(j for j, job in listed.items() if runs.get(j, 0) > job["attempts"])
    forgotten = sorted(j for j in seen_ids if listed.get(j, {}).get("state") != "completed" or runs.get(j) != 1)
    repeated = sorted(j for j, count in runs.items() if count > 1)
    bound = (1 + PREFETCH_PER_SLOT) * slots
    print(f"power-cut {home.name}: {len(listed)} jobs ({len(acked)} acknowledged), lost {len(lost)}, "
          f"stuck {len(stuck)}, completed with no run {len(never_ran)}; {len(seen_ids)} completions seen before "
          f"the cut, forgotten {len(forgotten)}; run again {len(repeated)} (at most {bound}: "
          f"{slots} slots x (1 + {PREFETCH_PER_SLOT})), runs the queue did not count {len(unaccounted)}")
    broken = {"lost": lost, "stuck": stuck, "completed with no run": never_ran, "forgotten": forgotten,
              "ran but not in the queue": unknown, "ran more often than its attempts count": unaccounted}
    if len(seen_ids) >= len(listed):  # every job had completed when the cut came: it cut no drain
        broken["the cut came after the drain had ended, proving nothing"] = ["(all)"]
    if len(repeated) > bound:
        broken["run again beyond the bound"] = repeated
    for what, ids in broken.items():
        if ids:
            print(f"FAIL: {home.name}: {what}: {' '.join(ids[:50])}", file=sys.stderr)
    if repeated:
        print(f"{home.name}: run again: {' '.join(repeated)}")
    return 1 if any(broken.values()) else 0


if __name__ == "__main__":
    command, home = sys.argv[1], Path(sys.argv[2])
    if command == "jobs":
        jobs(home, int(sys.argv[3]))
    elif command == "seen":
        seen(home)
    elif command == "prune":
        prune(home)
    elif command == "check":
        sys.exit(check(home, int(sys.argv[3])))
    else:
        sys.exit(f"power_cut.py: unknown command {command}")
