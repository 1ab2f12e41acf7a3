"""The store's conformance suite: each concern's rules, through the interface, on both engines.

Every module is marked BOTH_ENGINES (tests/support/engines.py): each test runs on SQLite and on PostgreSQL, and
reaches the store (the `store` fixture) through its interface alone (queuectl.store.interface): the same tests
hold both engines to the same rules. A state the interface cannot make is arranged by support.backdoor; the
steps of a worker are support.worker_steps'."""
