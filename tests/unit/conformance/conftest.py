"""Every test of the conformance suite runs on SQLite and on PostgreSQL (tests/conftest.py's backend_db), and
reaches the store (the `store` fixture) through its interface alone (queuectl.store.interface): the same
tests hold both engines to the same rules. A state the interface cannot make is arranged by
support.backdoor; the steps of a worker are support.worker_steps'."""

import pytest


@pytest.fixture
def db(backend_db):
    """Each test runs on SQLite and on PostgreSQL."""
    return backend_db
