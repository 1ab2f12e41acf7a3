"""The store's interface by caller (queuectl.store.interface): every store method that the workers call is
in WorkerStore, every one that the commands call is in CommandStore, and each engine has every method."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from queuectl.store import CommandStore, Store, WorkerStore
from queuectl.store.postgres import PostgresStore
from queuectl.store.sqlite import SqliteStore

PACKAGE = Path(__file__).resolve().parents[2] / "queuectl"
CALL = re.compile(r"\bstore\.([a-z_]+)\(")


def methods(protocol) -> set[str]:
    return {name for name in dir(protocol) if not name.startswith("_")}


def called(*places: str) -> set[str]:
    """The store methods called as `store.NAME(` in the files under `places` (folders or files of queuectl/)."""
    files = [f for place in places for f in ((PACKAGE / place).rglob("*.py") if (PACKAGE / place).is_dir()
                                            else [PACKAGE / place])]
    return {name for f in files for name in CALL.findall(f.read_text())}


@pytest.mark.parametrize("protocol, places", [
    (WorkerStore, ("worker",)),
    (CommandStore, ("api", "cli", "control.py")),
], ids=["workers", "commands"])
def test_each_caller_calls_only_its_part_of_the_interface(protocol, places):
    uses = called(*places)
    assert len(uses) >= 10, uses  # the scan found the calls
    assert uses - methods(protocol) == set()


def test_the_store_is_both_parts_and_each_engine_has_every_method():
    assert methods(Store) == methods(CommandStore) | methods(WorkerStore)
    for engine in (SqliteStore, PostgresStore):
        assert methods(Store) - methods(engine) == set(), engine
