"""Starting a worker (`queuectl worker start`): its store, waited for under systemd, and the Worker, its name
and queues checked. A module of its own: it imports the whole worker (queuectl.worker), which `worker stop`
(queuectl.api.workers) does without."""

from __future__ import annotations

import time
from typing import Callable, Collection, Sequence

from queuectl.api.database import Database
from queuectl.domain.errors import DatabaseUnavailable, InvalidConfig, InvalidInput
from queuectl.domain.jobspec import check_queue
from queuectl.host.notify import Notifier
from queuectl.worker import Worker, check_name, default_name

#: Seconds between tries of an unreachable PostgreSQL server at a worker's start under systemd:
#: doubling from the first to the second.
CONNECT_RETRY_MIN, CONNECT_RETRY_MAX = 1.0, 16.0


def worker_store(database: Database, wait: bool, say: Callable[[str], None],
                 sleep: Callable[[float], None] = time.sleep):
    """Open `database`'s store for a worker (a session of its own), waiting under systemd for its server.

    Under systemd (NOTIFY_SOCKET set) with `wait`, a PostgreSQL server that cannot be reached
    yet (it boots, the network comes up: DatabaseUnavailable) is waited for, with STATUS=
    saying so and `say` getting a line each time the reason changes, retrying every
    CONNECT_RETRY_MIN to CONNECT_RETRY_MAX seconds: systemd's TimeoutStartSec bounds the wait,
    and restarting at once would soon hit the unit's start limit. Elsewhere, with `wait` False
    (a burst worker: a batch that cannot reach its database fails rather than hangs), and on
    any other error, raises as Database.store does.
    """
    notifier, pause, said = Notifier(), CONNECT_RETRY_MIN, None
    while True:
        try:
            return database.store(session=True)
        except DatabaseUnavailable as e:
            if not (wait and notifier.enabled and database.is_postgres):
                raise
            if str(e) != said:
                say(f"{e}; waiting for it")
                said = str(e)
            notifier.status(f"waiting for the database: {e}")
            sleep(pause)
            pause = min(pause * 2, CONNECT_RETRY_MAX)


def worker_for(store_for: Callable[[], object], name: str | None = None, slots: int = 1, queues: Sequence[str] = (),
               burst: bool = False, unit: str | None = None, from_environment: Collection[str] = ()):
    """Return the queuectl.worker.Worker that `worker start` runs, its store from `store_for()` once its name and
    queues are checked: `name` (None: HOST-PID; "" is refused), `queues` each a name or several separated by
    commas (empty ones left out, each named once, in order; none: every queue).

    Raises InvalidInput for a bad name or queue, or InvalidConfig when it came from the environment (a name
    of `from_environment`: "name", "queues"): a unit's setting, which a restart would not fix (exit 78, which
    the unit does not restart on). Raises what Worker and `store_for` raise (InvalidConfig, DatabaseError).
    """
    def checked(field: str, variable: str, check):
        try:
            return check()
        except InvalidInput as e:
            if field in from_environment:
                raise InvalidConfig(f"{variable}: {e}") from None
            raise

    name = checked("name", "QUEUECTL_WORKER_NAME", lambda: default_name() if name is None else check_name(name))
    queues = checked("queues", "QUEUECTL_WORKER_QUEUES",
                     lambda: tuple(dict.fromkeys(check_queue(q) for arg in queues for q in arg.split(",") if q)))
    return Worker(store_for(), name=name, slots=slots, queues=queues, burst=burst, unit=unit)
