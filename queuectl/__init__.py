"""queuectl: a durable job queue for shell commands, driven from the command line.

The rooms, each importing only those below it:
    cli/, tui/, web/   front ends: parse, call the library, show
    api/               the library: one function per operation, and the rules of each
    worker/            the worker's loop and its parts (exchange, claims, duties)
    store/             the only place that knows SQL: SQLite and PostgreSQL
    host/              what touches the machine: processes, signals, systemd, wake-ups
    domain/            the queue's vocabulary and rules: records, states, errors, backoff, settings

Imports are at the top of each module, except where a start-up is held, and there only: `queuectl --help`
imports every command's module to list it (queuectl.cli.COMMANDS), so a command imports its work inside the
command; `queuectl enqueue` and `--version` import nothing they do not run (bench/startup.py holds an enqueue
to 1.3 times the start of Python with click, sqlite3 and json; tests/unit/test_startup.py); and the PostgreSQL
driver loads with a postgresql:// database only (queuectl.store.open_store).
"""

__version__ = "0.1.0"
