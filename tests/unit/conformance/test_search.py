"""Finding jobs (queuectl.store.search), on both engines through the interface: each filter field alone and in
pairs against a reading of every job, keyset pages that cover every match once while jobs are added, the capped
count, a job's dependencies both ways, and an existing database upgraded with the key index."""

from __future__ import annotations

import itertools

import pytest

from queuectl.domain.errors import NotFound
from queuectl.domain.models import JobState
from queuectl.store import open_store
from queuectl.store.jobfilter import JobFilter, Linked
from support.worker_steps import NOW, add, bad, claim, finish, new_job, ok, register
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES

#: Values each filter field is tried with (some match nothing).
VALUES = {
    "state": list(JobState),
    "queue": ["build", "deploy", "nope"],
    "key": ["k-build", "k-deploy", "k-none"],
    "after": ["a1", "b1", "c10"],
    "text": ["ECHO", "exit code", "%", "_", "dependency b1", "hello_w", "zzz"],
    "id_prefix": ["a", "b1", "c1", "c10", "z"],
}


@pytest.fixture
def jobs(store):
    """Jobs in every state but blocked: a1 completed (releasing b2), b1 dead (cancelling b3, which was also after
    a1), a2 cancelled, ab failed, c10 processing, b2, c1 and p1 pending; c1 holds a1's key again."""
    add(store, id="a1", queue="build", command="make ALL", key="k-build")
    add(store, id="a2", queue="build", command="echo 100%")
    add(store, id="b1", queue="deploy", command="echo Hello_World", key="k-deploy", max_retries=0)
    add(store, id="b2", queue="deploy", command="rsync site", after="a1")
    add(store, id="b3", queue="build", command="make docs", after=["a1", "b1"])
    add(store, id="ab", command="exit 3", max_retries=2)
    add(store, id="c10", queue="build", command="echo c10")
    store.cancel(["a2"], NOW)
    w = register(store, slots=10)
    assert [j.id for j in claim(store, w, [], 10, NOW)] == ["a1", "b1", "ab", "c10"]
    finish(store, w, [ok("a1"), bad("b1"), bad("ab", 3)], NOW)
    add(store, id="c1", queue="deploy", command="false", key="k-build")
    add(store, id="p1", queue="build", command="echo PLAIN")
    return store


def expected(store, f: JobFilter) -> list[str]:
    """The ids of the jobs `f` matches, newest first, read from every job (the filter's meaning in Python)."""
    def matches(j) -> bool:
        return ((f.state is None or j.state == f.state) and (f.queue is None or j.queue == f.queue)
                and (f.key is None or j.key == f.key) and (f.after is None or f.after in j.after)
                and (f.text is None or f.text.lower() in j.command.lower()
                     or f.text.lower() in (j.last_error or "").lower())
                and (f.id_prefix is None or j.id.startswith(f.id_prefix)))
    return [j.id for j in store.list_jobs(limit=1000) if matches(j)]


def found(store, f: JobFilter, **kw) -> list[str]:
    return [j.id for j in store.find_jobs(f, **kw)]


def test_the_set_is_as_the_filters_assume(jobs):
    got = {j.id: (j.state.value, j.last_error) for j in jobs.list_jobs(limit=100)}
    assert got == {"a1": ("completed", None), "a2": ("cancelled", "cancelled"), "b1": ("dead", "exit code 1"),
                   "b2": ("pending", None), "b3": ("cancelled", "dependency b1 is dead"),
                   "ab": ("failed", "exit code 3"), "c10": ("processing", None), "c1": ("pending", None),
                   "p1": ("pending", None)}


@pytest.mark.parametrize("f, ids", [
    (JobFilter(state=JobState.PENDING), ["p1", "c1", "b2"]),
    (JobFilter(queue="build"), ["p1", "c10", "b3", "a2", "a1"]),
    (JobFilter(key="k-build"), ["c1", "a1"]),  # ended or not
    (JobFilter(after="a1"), ["b3", "b2"]),
    (JobFilter(text="hello_WORLD"), ["b1"]),  # any case
    (JobFilter(text="EXIT CODE"), ["ab", "b1"]),  # the command ("exit 3") does not hold it; the last error does
    (JobFilter(text="%"), ["a2"]),  # no wildcards: a LIKE would match every job
    (JobFilter(text="_"), ["b1"]),
    (JobFilter(id_prefix="c1"), ["c1", "c10"]),
    (JobFilter(id_prefix="a"), ["ab", "a2", "a1"]),
    (JobFilter(state=JobState.CANCELLED, queue="build"), ["b3", "a2"]),
    (JobFilter(queue="build", text="echo"), ["p1", "c10", "a2"]),
    (JobFilter(), ["p1", "c1", "c10", "ab", "b3", "b2", "b1", "a2", "a1"]),
])
def test_each_field_finds_what_it_means(jobs, f, ids):
    assert found(jobs, f) == ids == expected(jobs, f)
    assert jobs.count_jobs(f) == len(ids)


def test_every_field_alone_and_every_pair_agree_with_reading_every_job(jobs):
    tried = nonempty = 0
    for one, other in itertools.chain(((name, None) for name in VALUES), itertools.combinations(VALUES, 2)):
        for values in itertools.product(VALUES[one], VALUES[other] if other else [None]):
            f = JobFilter(**{one: values[0], **({other: values[1]} if other else {})})
            want = expected(jobs, f)
            assert found(jobs, f, limit=1000) == want, f
            assert jobs.count_jobs(f) == len(want), f
            tried, nonempty = tried + 1, nonempty + bool(want)
    assert (tried, nonempty > 80) == (345, True), nonempty


def test_a_found_job_has_its_dependencies_as_list_jobs_gives_them(jobs):
    [b3] = jobs.find_jobs(JobFilter(id_prefix="b3"))
    assert b3.after == ("a1", "b1") == jobs.get_job("b3").after
    assert b3.seq > 0 and b3.command == "make docs"


@pytest.mark.parametrize("f", [JobFilter(), JobFilter(queue="build"), JobFilter(state=JobState.PENDING),
                               JobFilter(text="e"), JobFilter(id_prefix="j")])
def test_keyset_pages_cover_every_match_once_while_jobs_are_added(store, f):
    for i in range(11):
        add(store, id=f"j{i:02d}", queue="build" if i % 3 else "other", command=f"echo {i}")
    want = expected(store, f)
    assert len(want) >= 7
    seen, before, page = [], None, 0
    while True:
        jobs = store.find_jobs(f, before, 2)
        seen += [j.id for j in jobs]
        add(store, id=f"new{page}", queue="build", command="echo new")  # newer than every page to come
        page += 1
        if len(jobs) < 2:
            break
        before = jobs[-1].seq
    assert seen == want  # each once, newest first, none of those added meanwhile
    assert page == len(want) // 2 + 1
    if f.id_prefix is None:  # the added jobs match: a search from the top finds them
        assert found(store, f, limit=1000)[:page] == [f"new{i}" for i in reversed(range(page))]


def test_a_page_before_a_seq_holds_only_older_jobs(jobs):
    seqs = {j.id: j.seq for j in jobs.list_jobs(limit=100)}
    assert found(jobs, JobFilter(queue="build"), before_seq=seqs["b3"]) == ["a2", "a1"]
    assert found(jobs, JobFilter(queue="build"), before_seq=seqs["p1"], limit=2) == ["c10", "b3"]
    assert found(jobs, JobFilter(state=JobState.PENDING), before_seq=seqs["b2"]) == []


def test_the_count_stops_at_the_cap_plus_one(store):
    store.enqueue([new_job(id=f"j{i}", queue="q") for i in range(12)], NOW)
    for f in (JobFilter(queue="q"), JobFilter(text="TRUE"), JobFilter(id_prefix="j1"), JobFilter()):
        n = len(expected(store, f))
        assert store.count_jobs(f, cap=100) == n
        assert store.count_jobs(f, cap=2) == 3  # one more than the cap: "more than 2"
        assert store.count_jobs(f, cap=n) == n
    assert store.count_jobs(JobFilter(queue="nope"), cap=0) == 0


def test_dependencies_both_ways_with_their_states(jobs):
    deps = jobs.dependencies("b3")
    assert deps == ((Linked("a1", JobState.COMPLETED), Linked("b1", JobState.DEAD)), False, (), False)
    deps = jobs.dependencies("a1")
    assert deps.waits_for == () and not deps.more_waits_for
    assert deps.waited_by == (Linked("b2", JobState.PENDING), Linked("b3", JobState.CANCELLED))
    assert jobs.dependencies("p1") == ((), False, (), False)
    with pytest.raises(NotFound, match="no job with id 'nope'"):
        jobs.dependencies("nope")


def test_dependencies_are_bounded_at_100_each_way(store):
    store.enqueue([new_job(id=f"d{i:03d}") for i in range(101)], NOW)
    store.enqueue([new_job(id="mid", after=[f"d{i:03d}" for i in range(101)])], NOW)
    store.enqueue([new_job(id=f"w{i:03d}", after="mid") for i in range(100)], NOW)
    deps = store.dependencies("mid")
    assert [d.id for d in deps.waits_for] == [f"d{i:03d}" for i in range(100)] and deps.more_waits_for
    assert [d.id for d in deps.waited_by] == [f"w{i:03d}" for i in range(100)] and not deps.more_waited_by
    assert {d.state for d in deps.waited_by} == {JobState.BLOCKED}
    store.enqueue([new_job(id="w100", after="mid")], NOW)
    assert store.dependencies("mid").more_waited_by


def test_an_existing_database_is_upgraded_with_the_key_index(db, monkeypatch):
    import queuectl.store.postgres.store as pg
    import queuectl.store.sqlite.store as lite

    engine = lite if "://" not in db else pg
    current = engine.SCHEMA_VERSION
    monkeypatch.setattr(engine, "SCHEMA_VERSION", current - 1)  # the schema before finding jobs
    with open_store(db) as old:
        add(old, id="old1", key="k1", command="echo OLD")
        add(old, id="old2", key="k2")
        w = register(old)
        claim(old, w, [], 1, NOW)
        finish(old, w, [ok("old1")], NOW)
    monkeypatch.setattr(engine, "SCHEMA_VERSION", current)
    with open_store(db) as new:
        assert found(new, JobFilter(key="k1")) == ["old1"]  # ended, so no longer in the held keys' index
        assert found(new, JobFilter(id_prefix="old")) == ["old2", "old1"]
        add(new, id="new1", key="k1")
        assert found(new, JobFilter(key="k1")) == ["new1", "old1"]
        assert new.count_jobs(JobFilter(text="old")) == 1


def test_a_read_only_store_finds_counts_and_reads_dependencies(jobs, db):
    with open_store(db, read_only=True) as reader:  # the dashboard's reads
        for f in (JobFilter(queue="build"), JobFilter(id_prefix="a"), JobFilter(key="k-build", text="make")):
            assert found(reader, f) == expected(jobs, f) and reader.count_jobs(f) == len(expected(jobs, f))
        assert reader.dependencies("b3") == jobs.dependencies("b3")
