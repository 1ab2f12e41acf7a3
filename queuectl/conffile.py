"""The site configuration file, /etc/queuectl/queuectl.conf (INI): the system database and setting defaults.

    [queuectl]
    db = /var/lib/queuectl/queuectl.db        # or a PostgreSQL URI: postgresql://queuectl@dbhost/queuectl

    [defaults]
    max-retries = 5

`db` applies when neither --db nor QUEUECTL_DB is given. [defaults] replaces the built-in
default of a setting; a value stored with `queuectl config set` still wins over it.
QUEUECTL_CONFIG names another file, which must exist (empty: none).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from queuectl import settings
from queuectl.dburi import is_uri, near_miss, redact
from queuectl.errors import InvalidConfig, InvalidInput

DEFAULT_PATH = "/etc/queuectl/queuectl.conf"


@dataclass(frozen=True)
class SiteConfig:
    """What the file says: `db` (a path, a PostgreSQL URI, or None) and typed setting `defaults` by canonical key."""

    path: str | None = None
    db: str | None = None
    defaults: dict[str, Any] = field(default_factory=dict)


def load(environ: Mapping[str, str] = os.environ) -> SiteConfig:
    """Read the site configuration file if there is one; raises InvalidConfig if it is malformed."""
    path = environ.get("QUEUECTL_CONFIG", DEFAULT_PATH)
    if not path:
        return SiteConfig()
    if not os.path.exists(path):
        if path != DEFAULT_PATH:  # named on purpose: a typo must not fall back to a private queue
            raise InvalidConfig(f"QUEUECTL_CONFIG names {path}, which does not exist")
        return SiteConfig()
    import configparser  # only when there is a file: keeps it off most start-ups
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except FileNotFoundError:
        return SiteConfig()
    except configparser.MissingSectionHeaderError as e:  # its message repeats the line: it may hold a password
        raise InvalidConfig(f"cannot read {path}: line {e.lineno} comes before any [section] header") from None
    except configparser.ParsingError as e:
        lines = ", ".join(str(lineno) for lineno, _ in e.errors)
        raise InvalidConfig(f"cannot read {path}: line {lines}: not KEY = VALUE") from None
    except (OSError, UnicodeDecodeError, configparser.Error) as e:
        raise InvalidConfig(f"cannot read {path}: {' '.join(str(e).split())}") from None
    problems = [f"[{s}]" for s in parser.sections() if s not in ("queuectl", "defaults")]
    if parser.has_section("queuectl"):
        problems += [f"[queuectl] {k}" for k in parser["queuectl"] if k != "db"]
    if problems:
        raise InvalidConfig(f"{path}: unknown {', '.join(problems)}; expected [queuectl] db = PATH (or URI)"
                            " and [defaults] SETTING = VALUE")
    db = parser.get("queuectl", "db", fallback=None) or None
    if db is not None and not os.path.isabs(db) and not is_uri(db):
        why = near_miss(db) or f"got {redact(repr(db), db)}"  # a mistyped URI may hold a password
        raise InvalidConfig(f"{path}: db must be an absolute path or a postgresql:// URI: {why}")
    defaults = {}
    if parser.has_section("defaults"):
        for key, raw in parser.items("defaults"):
            try:
                name = settings.canonical_key(key)
                defaults[name] = settings.parse_value(name, raw)
            except InvalidInput as e:
                raise InvalidConfig(f"{path}: [defaults] {e}") from None
    return SiteConfig(path, db, defaults)
