"""The queue's storage: the shared records and rules (base) and the SQLite store (sqlite).

Everything else imports from here: `from queuectl.store import SqliteStore, Outcome`.
"""

from queuectl.store.base import PURGE_BATCH, CancelResult, DuplicateJob, JobProcess, Outcome, WorkerGone
from queuectl.store.sqlite import BUSY_TIMEOUT, WAL_SIZE_LIMIT, SqliteStore, default_db_path

__all__ = ["SqliteStore", "Outcome", "JobProcess", "CancelResult", "DuplicateJob", "WorkerGone", "PURGE_BATCH",
           "BUSY_TIMEOUT", "WAL_SIZE_LIMIT", "default_db_path"]
