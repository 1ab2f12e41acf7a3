"""Load for the chaos and fault tests: jobs that log every run, and what their log shows.

A job made by `RunLog.command` holds an flock on a file of its own while it runs and appends
"ID ATTEMPT start NS" and "ID ATTEMPT end NS" (CLOCK_REALTIME nanoseconds, from `date`) to one
log, opened with O_APPEND (the shell's `>>`), so lines of concurrent jobs never mix. A second
copy of a job that starts while the first still runs finds the lock taken and logs
"ID ATTEMPT overlap 0", even if the first never gets to log its end (its worker was killed).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path


class RunLog:
    """A directory of per-job lock files and the one log that every run of a test's jobs appends to."""

    def __init__(self, directory: Path):
        self.locks = directory / "locks"
        self.locks.mkdir(parents=True)
        self.path = directory / "runs.log"

    def command(self, seconds: str = "0.01", until: Path | None = None) -> str:
        """A job that logs its start, sleeps `seconds` (sleep(1)'s syntax) or until the file `until`
        exists, and logs its end."""
        log = self.path
        wait = f"sleep {seconds}" if until is None else f"until [ -e {until} ]; do sleep 0.05; done"
        run = (f'echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT start $(date +%s%N)" >> {log}; {wait}; '
               f'echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT end $(date +%s%N)" >> {log}')
        return (f"flock -n -E 97 {self.locks}/$QUEUECTL_JOB_ID sh -c '{run}' "
                f'|| {{ [ $? -ne 97 ] || echo "$QUEUECTL_JOB_ID $QUEUECTL_ATTEMPT overlap 0" >> {log}; exit 1; }}')

    def jobs(self, ids: list[str], max_ms: int = 0, seed: int = 20261201) -> list[dict]:
        """One job per id, each sleeping 10 ms, or with `max_ms` a random 0 to max_ms ms (seeded)."""
        rng = random.Random(seed)
        return [{"id": i, "command": self.command(f"0.{rng.randrange(max_ms + 1):03d}" if max_ms else "0.01")}
                for i in ids]

    def story(self, job_ids: list[str], logs: dict[str, str]) -> str:
        """What the run log and the workers' `logs` (name -> output) say of `job_ids`: for a failure message."""
        wanted = set(job_ids)
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        told = [line for line in lines if line.split(" ", 1)[0] in wanted]
        told += [f"{name}: {line}" for name, text in logs.items()
                 for line in text.splitlines() if any(j in line for j in wanted)]
        return "\n".join(told)

    def read(self) -> "Runs":
        runs = Runs()
        if not self.path.exists():
            return runs
        for line in self.path.read_text().splitlines():
            job_id, attempt, kind, ns = line.split()
            if kind == "overlap":
                runs.overlaps.append(job_id)
            elif kind == "start":
                runs.started[job_id] += 1
            runs.per_job[job_id][int(attempt)][kind] = int(ns)
        return runs


@dataclass
class Runs:
    """What a RunLog recorded: per job, per attempt, its start and end times."""

    per_job: dict[str, dict[int, dict[str, int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(dict)))
    overlaps: list[str] = field(default_factory=list)  # runs that found their job's lock taken
    #: Per job, the start lines in the log: every run, two of the same attempt number included (a run
    #: given back as unstarted and run again), which per_job, by attempt, keeps as one.
    started: Counter = field(default_factory=Counter)

    @property
    def starts(self) -> int:
        """Runs started, counted by their lines in the log."""
        return sum(self.started.values())

    @property
    def unfinished(self) -> int:
        """Runs that logged a start and no end: cut short (their worker was killed with them)."""
        return sum(1 for per in self.per_job.values() for r in per.values() if "end" not in r)

    def reruns(self) -> int:
        """Runs beyond the first of each job."""
        return self.starts - len(self.per_job)

    def finished(self) -> list[str]:
        """The jobs with at least one run that logged its end."""
        return sorted(j for j, per in self.per_job.items() if any("end" in r for r in per.values()))

    def overlapping(self) -> list[str]:
        """Jobs with two runs whose [start, end] intervals intersect, or that found the lock taken."""
        found = list(self.overlaps)
        for job_id, per in self.per_job.items():
            ordered = sorted((r for r in per.values() if "start" in r), key=lambda r: r["start"])
            found += [job_id for a, b in zip(ordered, ordered[1:]) if "end" in a and a["end"] > b["start"]]
        return found
