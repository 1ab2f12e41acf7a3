"""A read-only store (open_store's read_only: `queuectl top` on a file it may not write, the dashboard's reads) on
SQLite and PostgreSQL: every read answers, every write is refused and changes nothing."""

import pytest

from queuectl.errors import PermissionDenied
from queuectl.models import JobState
from queuectl.store import open_store
from support.worker_steps import NOW, add, new_job


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
