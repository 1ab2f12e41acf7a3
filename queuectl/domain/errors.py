"""Domain errors. The CLI maps each class to its exit code in one place (queuectl.cli.EXIT_CODES)."""


class QueuectlError(Exception):
    """Base of every error queuectl reports to a user as one line."""


class NotFound(QueuectlError):
    """A named job or worker does not exist (exit 1)."""


class Conflict(QueuectlError):
    """The request clashes with the queue's state: a duplicate id, a job in the wrong state (exit 1)."""


class DatabaseError(QueuectlError):
    """The database cannot be used: locked, unreadable, not a queuectl database (exit 1)."""


class DatabaseUnavailable(DatabaseError):
    """The database cannot be reached or take writes for now, for any process alike (exit 1).

    A PostgreSQL server that cannot be connected to or whose connection was lost, a SQLite file
    locked by another process for longer than the busy timeout, a full disk: a new process
    would meet the same, so a worker rides it out (see queuectl.worker, the watchdog rule).
    """


class InvalidInput(QueuectlError):
    """A job, a config value or an argument is malformed (exit 2)."""


class PermissionDenied(InvalidInput):
    """This user may not use the database (exit 2); never a configuration error, whoever named the path."""


class Interrupted(QueuectlError):
    """The user interrupted the command (Ctrl+C, SIGINT) before it finished (exit 130, as a shell gives it)."""


class InvalidConfig(QueuectlError):
    """The configuration in force is invalid, so a worker cannot run (exit 78, EX_CONFIG of sysexits.h)."""
