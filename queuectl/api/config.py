"""The queue's settings, kept in the database and shared by every worker: get, set, list."""

from __future__ import annotations

from typing import Any
from queuectl.domain.settings import canonical_key


def get(store, key: str) -> tuple[str, Any]:
    """Return (the canonical key, its value in force) for `key` (hyphens or underscores); raises InvalidInput
    for an unknown key."""
    name = canonical_key(key)
    return name, store.settings()[name]


def set_(store, key: str, value: str) -> tuple[str, Any]:
    """Set `key` to `value` (text, as typed); return (the canonical key, the value stored). Raises
    InvalidInput for an unknown key or a bad value."""
    name = canonical_key(key)
    return name, store.set_setting(name, value)


def all_settings(store) -> dict[str, Any]:
    """Return every setting's value in force, by canonical key."""
    return store.settings()
