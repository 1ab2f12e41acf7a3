"""The store's interface by caller (queuectl.store.interface): every store method that the workers call is
in WorkerStore, every one that the commands call is in CommandStore, the conformance suite (tests/unit/conformance)
and the worker's steps it takes (tests/support/worker_steps.py) call the interface alone, and each engine has every
method with the documented parameters."""

from __future__ import annotations

import importlib
from abc import ABC
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import queuectl.store
from queuectl.store.interface import CommandStore, Store, WorkerStore
from queuectl.store.core import SqlCore
from queuectl.store.sql import SqlStore
from queuectl.store.postgres import PostgresStore
from queuectl.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "queuectl"
CALL = re.compile(r"\bstore\.([a-z_]+)\(")
#: What a test of the interface must not touch: a store's private members and its connection.
REACH_IN = re.compile(r"\b(?:store|s)\.(?:_[a-z_]+|c|conn)\b")


def methods(protocol) -> set[str]:
    return {name for name in dir(protocol) if not name.startswith("_")}


def sources(*places: str, under: Path = PACKAGE) -> list[Path]:
    """The Python files under `places` (folders or files below `under`)."""
    return [f for place in places for f in ((under / place).rglob("*.py") if (under / place).is_dir()
                                           else [under / place])]


def called(*places: str, under: Path = PACKAGE) -> set[str]:
    """The store methods called as `store.NAME(` in the files under `places` (folders or files below `under`)."""
    return {name for f in sources(*places, under=under) for name in CALL.findall(f.read_text())}


@pytest.mark.parametrize("protocol, places", [
    (WorkerStore, ("worker",)),
    (CommandStore, ("api", "cli", "host/control.py")),
], ids=["workers", "commands"])
def test_each_caller_calls_only_its_part_of_the_interface(protocol, places):
    uses = called(*places)
    assert len(uses) >= 10, uses  # the scan found the calls
    assert uses - methods(protocol) == set()


def test_the_store_is_both_parts_and_each_engine_has_every_method():
    assert methods(Store) == methods(CommandStore) | methods(WorkerStore)
    for engine in (SqliteStore, PostgresStore):
        assert methods(Store) - methods(engine) == set(), engine


CONFORMANCE = ("unit/conformance", "support/worker_steps.py")


def test_the_conformance_suite_calls_the_interface_alone():
    uses = called(*CONFORMANCE, under=ROOT / "tests")
    assert len(uses) >= 30, uses  # the scan found the calls
    assert uses - methods(Store) == set()
    reach_ins = [f"{f.name}: {m}" for f in sources(*CONFORMANCE, under=ROOT / "tests")
                 for m in REACH_IN.findall(f.read_text())]
    assert reach_ins == []


def test_both_engines_implement_the_documented_interface_with_its_parameters():
    documented = {n: getattr(Store, n) for n in dir(Store)  # its own and its parts' (store.interface)
                  if not n.startswith("_") and callable(getattr(Store, n))}
    assert len(documented) > 30
    for engine in (SqliteStore, PostgresStore):
        for name, f in documented.items():
            impl = getattr(engine, name, None)
            assert callable(impl), f"{engine.__name__} lacks {name}"
            # After the receiver (self; a concern function's engine, db or store), the same parameters.
            assert list(inspect.signature(impl).parameters)[1:] == list(inspect.signature(f).parameters)[1:], (
                engine.__name__, name)


def _store_classes() -> list[type]:
    """Every class that is a store (SqlCore and its subclasses), from the modules of queuectl.store."""
    for info in pkgutil.walk_packages(queuectl.store.__path__, "queuectl.store."):
        importlib.import_module(info.name)
    found, todo = [], [SqlCore]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_the_store_is_composed_each_method_defined_once_along_its_classes():
    """Issue 36: concern modules of functions that take the engine, gathered by a facade (SqlStore), not a tower
    of concern classes: no store class has more than two bases, and none defines again a method that a class it
    inherits from defines, unless that one is abstract (an engine's hook)."""
    classes = _store_classes()
    assert {c.__name__ for c in classes} >= {"SqlCore", "SqlStore", "SqliteStore", "PostgresStore"}
    for cls in classes:
        assert len(cls.__bases__) <= 2, cls
        for name, value in vars(cls).items():
            if name.startswith("__") or not (inspect.isfunction(value) or isinstance(value, (staticmethod, property))):
                continue  # a dialect's attribute (a clause, an exception class) is not a method
            for base in cls.__mro__[1:]:
                if name in vars(base):
                    assert getattr(vars(base)[name], "__isabstractmethod__", False), (
                        f"{cls.__name__}.{name} overrides {base.__name__}.{name}, which is not abstract")


def test_each_engine_implements_every_hook_and_a_facade_method_is_a_concern_function():
    for engine in (SqliteStore, PostgresStore):
        assert not engine.__abstractmethods__, engine
        assert engine.__mro__ == (engine, SqlStore, SqlCore, ABC, object)  # no concern class anywhere on the way
    # The facade names every operation of the interface but the engine's own (SqlCore: its hooks, now) and the
    # three that each engine defines once for itself.
    assert methods(Store) - set(vars(SqlStore)) - set(vars(SqlCore)) == {"exchange", "heartbeat", "purge"}
    for name, value in vars(SqlStore).items():
        if not name.startswith("_"):
            assert inspect.isfunction(value) and value.__module__.startswith("queuectl.store."), name
            assert value.__module__ != "queuectl.store.sql", name  # the facade defines no operation itself
