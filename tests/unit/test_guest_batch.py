"""The guests tier's scheduler (tests/guests/runs.py, Batch) with real processes: one run at a time until
the session waits, then every run left at once; a run past its time ended with everything it started; the
session's end stopping what runs and starting nothing more."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import pytest

from support.waiting import wait_for
from guests.runs import Batch
from support.procstat import gone


def shell(script: str, cwd: Path, started: list[str], key: str):
    """A start callable: records `key` in `started` when called, then runs `script` in a session of its own."""
    def start() -> subprocess.Popen:
        started.append(key)
        return subprocess.Popen(["sh", "-c", script], cwd=cwd, start_new_session=True)
    return start


@pytest.fixture
def batch():
    """Make a Batch(at_once, timeout); whatever its runs left going is ended after the test, failed or not."""
    made: list[Batch] = []

    def make(at_once: int, timeout: float) -> Batch:
        made.append(Batch(at_once, timeout))
        return made[-1]

    yield make
    for each in made:
        each.stop()


def in_background(runs: Batch, starts) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(runs.run(starts)), daemon=True)
    thread.start()
    return thread, out


def test_runs_one_at_a_time_until_hurried_then_every_one_left_at_once(batch, tmp_path):
    started: list[str] = []
    held = 'touch "$0.began"; while [ ! -e go ]; do sleep 0.02; done'
    starts = {key: shell(held.replace("$0", key), tmp_path, started, key) for key in ("a", "b", "c")}
    runs = batch(at_once=1, timeout=120)
    thread, ended = in_background(runs, starts)
    wait_for(lambda: (tmp_path / "a.began").exists(), message="the first run")
    assert started == ["a"]  # the second waits for a free place while the first is held
    runs.hurry()
    wait_for(lambda: (tmp_path / "b.began").exists() and (tmp_path / "c.began").exists(),
             message="every run left started")
    assert started == ["a", "b", "c"]
    (tmp_path / "go").touch()
    thread.join(60)
    assert not thread.is_alive()
    assert {key: code for key, (code, _) in ended.items()} == {"a": 0, "b": 0, "c": 0}
    assert all(seconds >= 0 for _, seconds in ended.values())


def test_the_next_run_starts_when_one_ends_and_each_exit_code_is_kept(batch, tmp_path):
    started: list[str] = []
    starts = {"fails": shell("exit 3", tmp_path, started, "fails"), "next": shell("true", tmp_path, started, "next")}
    ended = batch(at_once=1, timeout=120).run(starts)
    assert {key: code for key, (code, _) in ended.items()} == {"fails": 3, "next": 0}
    assert started == ["fails", "next"]


def test_a_run_past_its_time_is_ended_with_everything_it_started(batch, tmp_path):
    # The run starts a child of its own (as autopkgtest starts QEMU) and would wait on it for ever.
    script = 'sleep 300 & echo $! > child; wait'
    ended = batch(at_once=1, timeout=0.5).run({"slow": shell(script, tmp_path, [], "slow")})
    assert ended["slow"][0] == -signal.SIGTERM
    child = int((tmp_path / "child").read_text())
    wait_for(lambda: gone(child), message="the run's child ended with it")


def test_stop_ends_the_running_and_starts_nothing_more(batch, tmp_path):
    started: list[str] = []
    starts = {key: shell(f'touch {key}.began; exec sleep 300', tmp_path, started, key) for key in ("a", "b")}
    runs = batch(at_once=1, timeout=120)
    thread, ended = in_background(runs, starts)
    wait_for(lambda: (tmp_path / "a.began").exists(), message="the first run")
    runs.stop()
    thread.join(60)
    assert not thread.is_alive()
    assert started == ["a"]
    assert ended == {"a": (-signal.SIGTERM, ended["a"][1])}


def test_a_stop_that_comes_while_a_run_starts_ends_that_run_too(batch, tmp_path):
    runs = batch(at_once=1, timeout=120)

    def start() -> subprocess.Popen:
        runs.stop()  # before the batch has seen the process this returns
        return subprocess.Popen(["sleep", "300"], start_new_session=True)

    thread, ended = in_background(runs, {"raced": start})
    thread.join(60)
    assert not thread.is_alive()
    assert ended["raced"][0] == -signal.SIGTERM
