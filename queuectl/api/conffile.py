"""The site configuration file, /etc/queuectl/queuectl.conf (INI): the system database and setting defaults.

    [queuectl]
    # or a PostgreSQL URI: postgresql://queuectl@dbhost/queuectl
    db = /var/lib/queuectl/queuectl.db
    # optional: the workers' own (direct) URI
    worker-db = postgresql://queuectl@dbhost:5432/queuectl

    [defaults]
    max-retries = 5

    # `queuectl web`'s options (queuectl.web.config.KEYS)
    [web]
    url-prefix = /queuectl
    users = /etc/queuectl/web-users

A comment is a line of its own (configparser's default): a `#` after a value is part of the value.

`db` applies when neither --db nor QUEUECTL_DB is given. `worker-db` is what workers use
instead of `db` (commands go through a pooler such as PgBouncer, workers need a direct
connection: see queuectl.api.database.Database.for_worker for the full order). [defaults] replaces the built-in
default of a setting; a value stored with `queuectl config set` still wins over it. [web] holds the
defaults of `queuectl web`'s options, which queuectl.web.config checks.
QUEUECTL_CONFIG names another file, which must exist (empty: none).
"""

import os
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from queuectl.domain.errors import InvalidConfig, InvalidInput
from queuectl.domain import settings
from queuectl.domain.dburi import is_uri, near_miss, redact

DEFAULT_PATH = "/etc/queuectl/queuectl.conf"


class SiteConfig(NamedTuple):
    """What the file says: `db` and `worker-db` (a path, a PostgreSQL URI, or None) and typed setting
    `defaults` by canonical key."""

    path: str | None = None
    db: str | None = None
    worker_db: str | None = None
    defaults: Mapping[str, Any] = MappingProxyType({})
    web: Mapping[str, str] = MappingProxyType({})


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
    problems = [f"[{s}]" for s in parser.sections() if s not in ("queuectl", "defaults", "web")]
    if parser.has_section("queuectl"):
        problems += [f"[queuectl] {k}" for k in parser["queuectl"] if k not in ("db", "worker-db")]
    if problems:
        raise InvalidConfig(f"{path}: unknown {', '.join(problems)}; expected [queuectl] db = PATH (or URI),"
                            " worker-db = PATH (or URI), [defaults] SETTING = VALUE and [web] OPTION = VALUE")
    db, worker_db = (_database(parser, path, key) for key in ("db", "worker-db"))

    defaults = {}
    if parser.has_section("defaults"):
        for key, raw in parser.items("defaults"):
            try:
                name = settings.canonical_key(key)
                defaults[name] = settings.parse_value(name, raw)
            except InvalidInput as e:
                raise InvalidConfig(f"{path}: [defaults] {e}") from None
    web = MappingProxyType(dict(parser.items("web"))) if parser.has_section("web") else MappingProxyType({})
    return SiteConfig(path, db, worker_db, defaults, web)


def _database(parser, path: str, key: str) -> str | None:
    """The [queuectl] `key` of the file: an absolute path, a PostgreSQL URI, or None; raises InvalidConfig."""
    value = parser.get("queuectl", key, fallback=None) or None
    if value is not None and not os.path.isabs(value) and not is_uri(value):
        why = near_miss(value) or f"got {redact(repr(value), value)}"  # a mistyped URI may hold a password
        raise InvalidConfig(f"{path}: {key} must be an absolute path or a postgresql:// URI: {why}")
    return value
