"""The worker: claim jobs, run them in up to N slots, record how they ended, heartbeat, drain on stop.

The worker knows no SQL: every state change goes through the store. It is made of components,
each a module with one job and its rules in its docstring:
- loop: the Worker, its loop and `tick(now)`, which calls the others in a fixed order;
- exchange and ledger: the hot path, one transaction per round trip that records every start,
  process group and end since the last one, gives back what the worker will not run, and
  claims (River's completer is the model);
- claims: the claim policy (how many, how far ahead, limited queues, give-backs);
- starts: starting the reserve's jobs in free slots (a last attempt's start recorded first);
- drain: a stop (announced, recorded, the reserve given back; a second request stops the jobs);
- outage: riding out a database that fails, and the watchdog rule;
- health: the heartbeat's timing, a late heartbeat, STATUS=;
- output: when a running job's new output is recorded;
- wakeups: what ends the loop's wait early (signals, pokes, LISTEN);
- duties: what the worker does besides running jobs, behind one contract `due(now)` /
  `run(now)`: recovery of lost workers' jobs, cancels, retention, schedules.
"""

from queuectl.worker.claims import HOLD, PREFETCH_PER_SLOT, RATE_WAIT_MIN
from queuectl.worker.exchange import RUN_LOST
from queuectl.worker.health import Stats
from queuectl.worker.ledger import RECORD_AFTER, RECORD_WITHIN, Ledger
from queuectl.worker.loop import EXIT_CONFIG, EXIT_LOST, EXIT_OK, Worker, check_name, default_name
from queuectl.worker.output import OUTPUT_EVERY, output_due
from queuectl.worker.outage import DB_RETRY

__all__ = ["DB_RETRY", "EXIT_CONFIG", "EXIT_LOST", "EXIT_OK", "HOLD", "Ledger", "OUTPUT_EVERY", "PREFETCH_PER_SLOT",
           "RATE_WAIT_MIN", "RECORD_AFTER", "RECORD_WITHIN", "RUN_LOST", "Stats", "Worker", "check_name",
           "default_name", "output_due"]
