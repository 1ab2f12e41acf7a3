"""A read-only store (open_store's read_only: `queuectl top` on a file it may not write, the dashboard's reads) on
SQLite and PostgreSQL: every read answers, every write is refused and changes nothing."""

import threading

import pytest

from queuectl.domain.errors import PermissionDenied
from queuectl.domain.models import JobState
from queuectl.store import open_store
from support.worker_steps import NOW, add, new_job
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


@pytest.fixture
def reader(store, db):
    add(store, NOW, id="a")
    with open_store(db, read_only=True) as reader:
        yield reader


def test_a_read_only_store_reads(reader):
    assert [j.id for j in reader.list_jobs()] == ["a"]
    assert reader.counts() == {"default": {"pending": 1}}
    assert reader.get_job("a").state is JobState.PENDING
    assert reader.settings()["max-retries"] >= 0


@pytest.mark.parametrize("write", [
    lambda s: s.enqueue([new_job(NOW, id="b")], NOW),
    lambda s: s.cancel(["a"], NOW),
    lambda s: s.set_paused(["default"], True, NOW),
    lambda s: s.set_setting("max-retries", "7"),
], ids=["enqueue", "cancel", "pause", "config set"])
def test_a_read_only_store_refuses_every_write_and_changes_nothing(reader, store, write):
    before = (store.counts(), store.paused_queues(), store.settings(), store.get_job("a"))
    with pytest.raises(PermissionDenied, match="read-only here"):
        write(reader)
    assert (store.counts(), store.paused_queues(), store.settings(), store.get_job("a")) == before



def test_a_store_serves_a_thread_other_than_the_one_that_opened_it(reader, store):
    # The dashboard's request threads take turns on its two connections (queuectl.web.reads), one at a time.
    seen = []

    def act_and_read():
        store.cancel(["a"], NOW)
        seen.append(reader.get_job("a").state)

    thread = threading.Thread(target=act_and_read)
    thread.start()
    thread.join()
    assert seen == [JobState.CANCELLED]
