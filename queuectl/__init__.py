"""queuectl: a durable job queue for shell commands, driven from the command line.

The rooms, each importing only those below it:
    cli/, tui/, web/   front ends: parse, call the library, show
    api/               the library: one function per operation, and the rules of each
    worker/            the worker's loop and its parts (exchange, claims, duties)
    store/             the only place that knows SQL: SQLite and PostgreSQL
    host/              what touches the machine: processes, signals, systemd, wake-ups
    domain/            the queue's vocabulary and rules: records, states, errors, backoff, settings
"""

__version__ = "0.1.0"
