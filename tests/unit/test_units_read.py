"""This host's worker units as the views read them (queuectl.api.units.Units): how often systemd is asked
(a counting `show` stands in for systemctl here: the parsing of its real output is tested in the system
tier, tests/system/test_web_service.py and test_systemd.py), and for which workers."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from queuectl.host import procs
from queuectl.api.units import EVERY, UnitState, Units
from support.inprocess import Clock


def snapshot_worker(wid: int, unit: str | None, host: str | None = None):
    """A snapshot's worker: its `info` with an id, a unit and a host (this host by default)."""
    return SimpleNamespace(info=SimpleNamespace(id=wid, unit=unit, host=host or procs.hostname()))


class Show:
    """systemctl show's stand-in: every unit asked for is active and running, restarted once; counts calls."""

    def __init__(self, gate: threading.Event | None = None):
        self.calls: list[tuple[str, ...]] = []
        self.gate = gate

    def __call__(self, names):
        if self.gate is not None:
            self.gate.wait(10)
        self.calls.append(tuple(names))
        return [{"Id": n, "ActiveState": "active", "SubState": "running", "NRestarts": "1"} for n in names]


def test_systemd_is_asked_at_most_every_interval():
    clock, show = Clock(), Show()
    units = Units(clock=clock, show=show)
    workers = [snapshot_worker(1, "queuectl-worker@1.service")]
    assert units.of(workers) == {1: UnitState("queuectl-worker@1.service", "active", "running", 1)}
    clock.now += EVERY - 0.1
    units.of(workers)
    assert len(show.calls) == 1
    clock.now += 0.1
    units.of(workers)
    assert len(show.calls) == 2 and units.reads == 2


def test_a_new_unit_is_read_at_once_and_a_worker_without_one_asks_nothing():
    clock, show = Clock(), Show()
    units = Units(clock=clock, show=show)
    assert units.of([snapshot_worker(1, None)]) == {} and show.calls == []
    units.of([snapshot_worker(1, "queuectl-worker@1.service")])
    both = [snapshot_worker(1, "queuectl-worker@1.service"), snapshot_worker(2, "queuectl-worker@2.service")]
    assert set(units.of(both)) == {1, 2}  # within the interval: the new worker's unit was not read yet
    assert show.calls == [("queuectl-worker@1.service",), ("queuectl-worker@1.service", "queuectl-worker@2.service")]
    units.of(both[:1])  # a subset of what was read: kept
    assert len(show.calls) == 2


def test_a_worker_of_another_host_has_no_unit_state_and_asks_nothing():
    show = Show()
    units = Units(clock=Clock(), show=show)
    elsewhere = snapshot_worker(3, "queuectl-worker@1.service", host=procs.hostname() + "-other")
    assert units.of([elsewhere]) == {} and show.calls == []  # the same unit name here is another unit
    assert units.of([elsewhere, snapshot_worker(4, "queuectl-worker@1.service")]).keys() == {4}


def test_threads_that_ask_together_wait_for_one_read():
    gate = threading.Event()
    show = Show(gate)
    units = Units(clock=Clock(), show=show)
    workers = [snapshot_worker(1, "queuectl-worker@1.service")]
    got: list[dict] = []
    threads = [threading.Thread(target=lambda: got.append(units.of(workers))) for _ in range(6)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(got) == 6 and all(g == got[0] for g in got) and len(show.calls) == 1


def test_without_systemd_here_no_worker_has_a_unit_state():
    """This machine runs no systemd (PID 1 is not systemd): the real systemctl is not asked and shows nothing."""
    from queuectl.host.units import systemd_booted

    if systemd_booted():
        pytest.skip("systemd runs here")
    assert Units().of([snapshot_worker(1, "queuectl-worker@1.service")]) == {}
