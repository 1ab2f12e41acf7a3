"""The queue's state for people and for Prometheus: the status report and the metrics text (and its file)."""

from __future__ import annotations

from dataclasses import dataclass
from queuectl.api.history import rates
from queuectl.api.metrics import check_target, render, write_file
from queuectl.api.schedules import to_dict as schedule_dict
from queuectl.api.snapshot import take
from queuectl.domain.models import iso
from queuectl.host import units

#: The held idempotency keys a status report lists, at most (by key; it says how many there are in all).
KEYS_SHOWN = 20
#: A status report shows the workers that ended in the last this many seconds, at most STOPPED_SHOWN of them.
STOPPED_SHOWN_FOR = 3600.0
STOPPED_SHOWN = 20


@dataclass(frozen=True)
class Status:
    """A status report: the snapshot (queuectl.api.snapshot.Snapshot), up to KEYS_SHOWN held keys as
    (key, job id, JobState) with how many are held in all, this host's worker units
    (queuectl.host.units.show: systemd's properties of each, by Id; empty without systemd), the jobs
    completed and failed per minute over the last 1, 5 and 15 minutes (queuectl.api.history.rates), the
    workers that ended in the last STOPPED_SHOWN_FOR seconds (queuectl.domain.models.StoppedWorker, newest first,
    at most STOPPED_SHOWN)."""

    snapshot: object
    keys: list
    keys_held: int
    units: list[dict[str, str]]
    rates: dict
    stopped: list = ()

    @property
    def now(self) -> float:
        """When it was read: the snapshot's time on the store's clock, Unix seconds."""
        return self.snapshot.now.wall

    def to_dict(self) -> dict:
        """Return the report as `status --json` prints it."""
        snap = self.snapshot
        return {"jobs": snap.totals, "queues": snap.counts,
                "keys": [{"key": k, "id": job_id, "state": state.value} for k, job_id, state in self.keys],
                "keys_held": self.keys_held,
                "paused": {q: iso(t) for q, t in snap.paused.items()},
                "limits": {q: lim.to_dict() for q, lim in snap.limits.items()},
                "schedules": [schedule_dict(sch) for sch in snap.schedules],
                "oldest_ready_age": {q: round(a, 3) for q, a in snap.oldest_ready.items()},
                "retention": snap.retention,
                "rates": self.rates,
                "workers": [w.info.to_dict(w.heartbeat_age, w.state) for w in snap.workers],
                "stopped_workers": [w.to_dict() for w in self.stopped],
                "units": [{"unit": u["Id"], "active_state": u.get("ActiveState"), "sub_state": u.get("SubState"),
                           "n_restarts": int(u.get("NRestarts") or 0), "status_text": u.get("StatusText", ""),
                           "main_pid": int(u.get("MainPID") or 0)} for u in self.units]}


def status(store) -> Status:
    """Read the status report: job counts by queue and state, limits, schedules, held keys, workers,
    this host's worker units and the rates of the last minutes. Raises what the store's reads raise."""
    snap = take(store)
    keys, keys_held = store.held_keys(KEYS_SHOWN)
    now = snap.now.wall
    return Status(snap, keys, keys_held, units.show(), rates(store, now),
                  store.stopped_workers(now - STOPPED_SHOWN_FOR, STOPPED_SHOWN))


def metrics(store) -> str:
    """Return the queue's metrics in the Prometheus text format (queuectl.api.metrics.render), with the wait
    and run time histograms of the activity history."""
    return render(take(store), store.activity_totals())


def write_metrics(store, path: str) -> str:
    """Write the metrics to `path` atomically (queuectl.api.metrics.write_file); return its absolute path.
    Raises InvalidInput for a path that cannot be written."""
    return write_file(metrics(store), check_target(path))
