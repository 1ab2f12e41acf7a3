"""A running job's output, on both engines through the interface: the worker records what it writes (appended,
bounded by output-limit, never twice), a reader takes it from a position, a retry starts from its first byte, and
the final record replaces the live output."""

from __future__ import annotations

from queuectl.domain.models import JobState
from queuectl.store.request import Exchange, Running
from support.worker_steps import NOW, add, bad, claim, finish, ok, record_output, register, started
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_live_output_is_appended_read_from_a_position_and_never_twice(store):
    add(store, id="a")
    w = started(store)
    record_output(store, w, "a", b"one\n", 0, b"e1\n")
    record_output(store, w, "a", b"two\n", 4, b"", 3)
    record_output(store, w, "a", b"two\n", 4, b"", 3)  # sent again after its reply was lost: nothing twice
    job, stored = store.read_output("a", None, (0, 0))
    assert (job.state, stored.attempt, stored.stdout, stored.stderr, stored.written) == (
        JobState.PROCESSING, 1, b"one\ntwo\n", b"e1\n", (8, 3))
    _, stored = store.read_output("a", 1, (4, 3))
    assert (stored.stdout, stored.stdout_from, stored.stderr, stored.stderr_from) == (b"two\n", 4, b"", 3)
    record_output(store, w, "a", b"two\nthree\n", 4, b"", 3)  # overlapping what was recorded: only the new bytes land
    assert store.read_output("a", 1, (0, 0))[1].stdout == b"one\ntwo\nthree\n"


def test_live_output_keeps_the_last_output_limit_bytes(store):
    store.set_setting("output-limit", "10")
    add(store, id="a")
    w = started(store)
    record_output(store, w, "a", b"0123456789", 0)
    record_output(store, w, "a", b"abcdef", 10)
    _, stored = store.read_output("a", 1, (0, 0))
    assert (stored.stdout, stored.stdout_from, stored.written[0]) == (b"6789abcdef", 6, 16)
    record_output(store, w, "a", b"XYZ", 100)  # bytes 16-99 were lost in the worker's own tail
    _, stored = store.read_output("a", 1, (16, 0))
    assert (stored.stdout, stored.stdout_from, stored.written[0]) == (b"XYZ", 100, 103)


def test_the_final_record_replaces_live_output_as_it_is_today(store):
    add(store, id="a")
    w = started(store)
    record_output(store, w, "a", b"partial", 0)
    finish(store, w, [ok("a")], NOW)
    job = store.get_job("a", output=True)
    assert (job.state, job.stdout, job.stderr) == (JobState.COMPLETED, b"out", b"err")


def test_a_retry_starts_the_next_attempt_from_its_first_byte(store):
    add(store, id="a", max_retries=1)
    w = started(store)
    record_output(store, w, "a", b"first try\n", 0)
    finish(store, w, [bad("a")], NOW)
    w2 = register(store, "w2")
    assert [j.id for j in claim(store, w2, [], 1, NOW + 100)] == ["a"]
    store.exchange(w2, Exchange(running=[Running("a", NOW + 100)]), [], NOW + 100)
    record_output(store, w2, "a", b"second\n", 0)
    _, stored = store.read_output("a", 1, (10, 4))
    assert (stored.attempt, stored.stdout, stored.stdout_from) == (2, b"second\n", 0)


def test_one_step_of_a_polled_follow_takes_the_next_attempt_from_its_first_byte_in_one_read(store):
    """queuectl.api.following.output_since (the dashboard's job page): the first step gives all of the current
    attempt; a step past it gives only the new bytes; a retry's step says so and gives the new attempt whole;
    each step is one read of the store."""
    from queuectl.api.following import output_since

    reads = []

    class Counted:
        def read_output(self, *args):
            reads.append(args)
            return store.read_output(*args)

    add(store, id="a", max_retries=1)
    w = started(store)
    record_output(store, w, "a", b"first try\n", 0)
    step = output_since(Counted(), "a", None, (0, 0))
    assert (step.attempt, step.restarted, step.stdout, step.positions) == (1, False, b"first try\n", (10, 0))
    record_output(store, w, "a", b"more\n", 10)
    step = output_since(Counted(), "a", 1, step.positions)
    assert (step.restarted, step.stdout, step.positions) == (False, b"more\n", (15, 0))
    finish(store, w, [bad("a")], NOW)
    w2 = register(store, "w2")
    assert [j.id for j in claim(store, w2, [], 1, NOW + 100)] == ["a"]
    store.exchange(w2, Exchange(running=[Running("a", NOW + 100)]), [], NOW + 100)
    record_output(store, w2, "a", b"second\n", 0)
    step = output_since(Counted(), "a", 1, step.positions)
    assert (step.attempt, step.restarted, step.stdout, step.positions) == (2, True, b"second\n", (7, 0))
    assert len(reads) == 3
