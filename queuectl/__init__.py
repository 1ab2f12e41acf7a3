"""queuectl: a durable job queue for shell commands, driven from the command line.

The rooms, each importing only those below it:
    cli/, tui/, web/   front ends: parse, call the library, show
    api/               the library: one function per operation, and the rules of each
    worker/            the worker's loop and its parts (exchange, claims, duties)
    store/             the only place that knows SQL: SQLite and PostgreSQL
    host/              what touches the machine: processes, signals, systemd, wake-ups
    domain/            the queue's vocabulary and rules: records, states, errors, backoff, settings

Imports are at the top of each module. A module is imported inside a function only at a seam, marked
`# seam:` where it sits:
- the command table (queuectl.cli.COMMANDS, and `worker`'s): a command's module is imported when the command
  runs or shows its own help; `queuectl --help` lists the commands by the table's short help and imports none
  (queuectl.cli.common.LazyGroup). So each command's module imports what it runs, and only it pays for that.
- the database's driver: the store loads when a command opens its database (queuectl.api.database), so
  --version, `queuectl --help` and the help of a command whose modules name no store type (enqueue, list,
  show, logs, wait, config, schedule) load none (tests/unit/test_startup.py); a command whose library module
  imports the store's records at its top (ops, limits, the dashboard's reads) loads it for its help too.
  PostgreSQL's driver loads only for a postgresql:// database (queuectl.store.open_store).
- enqueue --wait and --follow: what `wait` and `logs -f` run (queuectl.cli.waiting), which a plain enqueue
  does without.
- an optional library: the dashboard's Flask (queuectl.cli.web), once it is found, as PostgreSQL's driver.
- the schedules' rules (queuectl.domain.recurrence: zoneinfo, croniter), which the store loads when a schedule
  is read or fired (queuectl.store.schedules).
`queuectl enqueue` imports nothing it does not run: bench/startup.py holds it to 1.3 times the start of Python
with click, sqlite3 and json, tests/unit/test_startup.py to what it must not import. Where one command would
pay for another's imports, they are in modules of their own (queuectl.cli.worker_start, queuectl.api.starting).
"""

__version__ = "0.1.0"
