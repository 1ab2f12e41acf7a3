"""queuectl as a library: one documented function per operation, the rules every front end shares.

The command line (queuectl.cli), the terminal view and the web dashboard parse their input,
call one of these and show what it returns; none of them holds a rule of its own. Each
function takes an open store (queuectl.api.database.Database.store, or open_database) and
raises queuectl.domain.errors' domain errors, which each front end maps to its exit codes or statuses
in one place.

- database: which database is in force (--db, QUEUECTL_DB, the configuration file, the XDG
  default), and opening it.
- jobs: enqueue, and jobs read (listed, shown, their attempts and dependencies).
- waiting, following: wait for jobs to end (and enqueue-and-wait's status), follow a job's output.
- ops: cancel (and its wait for running jobs to stop), retry, dead letter queue retry, pause
  and resume, purge.
- schedules, limits, config: schedules (zone inheritance), per-queue limits, settings.
- status: the status report and the metrics (text, and its file written atomically).
- workers, starting: stopping this host's workers; starting one (its store, waited for at start, and
  the Worker).
- outage, snapshot, metrics, conffile: the pieces those are made of.

Modules are imported by name (`from queuectl.api import jobs`); this package imports nothing, so
that each command pays only for what it runs.
"""
