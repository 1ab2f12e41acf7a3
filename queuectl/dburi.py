"""What names a PostgreSQL database rather than a SQLite file (no imports: the CLI's start-up reads it)."""

import re

#: URI schemes libpq accepts; anything else given as a database is a SQLite path.
SCHEMES = ("postgresql://", "postgres://")

#: Meant for PostgreSQL but not a URI queuectl takes: a mistyped scheme, or libpq's keyword form.
_NEAR_URI = re.compile(r"(?i)^\s*postgres\w*:|^\s*(host|hostaddr|dbname|user|port|service)\s*=")


def is_uri(target: str) -> bool:
    """Return True if `target` names a PostgreSQL database (a postgresql:// or postgres:// URI)."""
    return target.startswith(SCHEMES)


def near_miss(target: str) -> str | None:
    """Say why `target` looks meant for PostgreSQL without being a URI queuectl takes; None if it does not.

    Such a value would otherwise be taken for a SQLite path and silently make a file of that name.
    The message never repeats more of `target` than its scheme (it may hold a password).
    """
    if is_uri(target) or not _NEAR_URI.match(target):
        return None
    if "=" in target.split(":", 1)[0]:
        return ("a libpq keyword string (host=... dbname=...) is not taken as a database:"
                " write it as a URI, postgresql://user@host/dbname")
    scheme = target.strip().split(":", 1)[0]
    return (f"{scheme}: is not a URI queuectl takes: a PostgreSQL database is postgresql://user@host/dbname"
            " (lower case, two slashes); a SQLite path must not start like this")
