"""What names a PostgreSQL database rather than a SQLite file (no imports: the CLI's start-up reads it)."""

#: URI schemes libpq accepts; anything else given as a database is a SQLite path.
SCHEMES = ("postgresql://", "postgres://")


def is_uri(target: str) -> bool:
    """Return True if `target` names a PostgreSQL database (a postgresql:// or postgres:// URI)."""
    return target.startswith(SCHEMES)
