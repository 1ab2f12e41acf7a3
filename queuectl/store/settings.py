"""Settings in the store: the values in force (stored, else defaults) and setting one."""

from __future__ import annotations

import json
from typing import Any

from queuectl.domain import settings as settings_mod
from queuectl.domain.errors import InvalidConfig
from queuectl.store.core import SqlCore


def settings(db: SqlCore) -> dict[str, Any]:
    """Return every setting's value in force (stored or default), by canonical key.

    Raises InvalidConfig if a stored value is not valid (for example edited by hand).
    """
    with db._errors():
        return read_settings(db.c, db.defaults)


def set_setting(db: SqlCore, key: str, raw: Any) -> Any:
    """Validate and store one setting; return its typed value.

    Raises InvalidInput for an unknown key, a bad value, or one that breaks the rule
    stale-after > 2 x heartbeat-interval.
    """
    name = settings_mod.canonical_key(key)
    value = settings_mod.parse_value(name, raw)
    with db._write() as c:
        # a bad stored value of `name` can be fixed
        merged = {**read_settings(c, db.defaults, skip=name), name: value}
        settings_mod.check_consistent(merged)
        c.execute(
            "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (name, json.dumps(value)),
        )
    return value


def read_settings(c, defaults: dict[str, Any], skip: str | None = None) -> dict[str, Any]:
    """Return every setting's value in force, read on `c`: stored, else from `defaults`, by canonical key; the
    stored value of `skip` is left out (a bad one can then be set again). Raises InvalidConfig for an unknown
    key or a value not valid (edited by hand, or written by a newer queuectl)."""
    values = dict(defaults)
    for r in c.execute("SELECT key, value FROM config WHERE key <> coalesce(?, '')", (skip,)):
        if r["key"] not in settings_mod.SETTINGS:
            raise InvalidConfig(f"the database holds an unknown setting {r['key']!r} (written by hand or"
                                " by a newer queuectl)")
        try:
            values[r["key"]] = settings_mod.parse_value(r["key"], json.loads(r["value"]))
        except (settings_mod.InvalidInput, ValueError) as e:
            reason = e if isinstance(e, settings_mod.InvalidInput) else f"{r['value']!r} is not a JSON value"
            raise InvalidConfig(f"the stored value of {r['key']} is invalid ({reason});"
                                f" set it again with `queuectl config set {r['key']} VALUE`") from None
    return values
