"""`queuectl top` in a real terminal (tmux: tests/support/tmux.py) against a real database and real workers:
what it shows follows the queue, its keys act through the api, and the terminal comes back however it ends."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from support.cli import QUEUECTL, Cli, enqueue
from support.suite import require
from support.waiting import wait_for
from support.workers import WorkerProcs
from queuectl.store import open_store
from support import tmux

INTERVAL = "0.5"


@pytest.fixture
def term():
    require(tmux.missing(), "processes")
    t = tmux.Terminal(100, 30)
    yield t
    t.close()


def start_top(term, db, *args: str, program=tuple(QUEUECTL)) -> None:
    """Print a marker, then run top (`program`: how queuectl is run) in the terminal's shell; wait for its first
    screen."""
    term.type("echo before-top")
    term.keys("Enter")
    term.wait_for("before-top\n")
    term.run([*program, "--db", db, "top", "--interval", INTERVAL, *args])
    term.wait_for(lambda s: s.startswith("queuectl top"), message="top's first screen")


def given_back(term, status: int) -> str:
    """Wait for the shell to say top exited with `status`, and for the screen from before top to be back."""
    shown = term.wait_for(lambda s: f"exit={status}" in s and s.rstrip().endswith(tmux.PROMPT.strip()),
                          message=f"exit={status}, then the shell's prompt")
    assert "before-top" in shown and "queuectl top -" not in shown, shown
    return shown


def quit_top(term) -> None:
    """Press q; top exits 0 and the terminal is back."""
    term.keys("q")
    given_back(term, 0)


def top_over_a_job(term, db, run_cli, *args: str) -> None:
    """Enqueue job j1 in queue default, then run top with `args`."""
    enqueue(run_cli, id="j1", command="true")
    start_top(term, db, *args)


def top_over_a_running_job(term, db, run_cli, workers, job_id: str, command: str) -> None:
    """Run job `job_id` on a worker, then top, until top shows it running."""
    enqueue(run_cli, id=job_id, command=command)
    workers.start()
    with open_store(db) as store:
        wait_for(lambda: store.get_job(job_id).state.value == "processing", message="the job to run")
    start_top(term, db)
    term.wait_for("Running (1)")


def row(screen: str, first: str) -> list[str]:
    """The cells of the line of `screen` that starts with `first`."""
    return next((ln.split() for ln in screen.splitlines() if ln.startswith(first + " ")), [])


def test_the_counts_follow_a_worker_draining_the_queue_and_q_gives_the_terminal_back(term, db, run_cli, workers):
    for n in range(5):
        enqueue(run_cli, id=f"j{n}", command="true")
    start_top(term, db)
    term.wait_for("pending 5  processing 0  completed 0")
    workers.start("--count", "2")
    shown = term.wait_for(lambda s: "pending 0  processing 0  completed 5" in s and "Workers (1)" in s
                          and re.search(r"^default +\S+ +\S+ +5 ", s, re.M), message="the queue drained")
    assert row(shown, "default")[:4] == ["default", "0", "0", "5"]  # QUEUE PEND RUN DONE
    quit_top(term)


def test_p_pauses_and_resumes_the_selected_queue(term, db, run_cli):
    top_over_a_job(term, db, run_cli)
    term.keys("p")
    term.wait_for("queue default paused")
    with open_store(db) as store:
        assert "default" in store.paused_queues()
    term.wait_for(lambda s: row(s, "default")[8:9] == ["paused"], message="the pane to show the pause")
    term.keys("p")
    term.wait_for("queue default resumed")
    with open_store(db) as store:
        assert store.paused_queues() == {}
    quit_top(term)


def test_c_asks_and_y_cancels_the_selected_running_job(term, db, run_cli, workers):
    top_over_a_running_job(term, db, run_cli, workers, "sleeper", "sleep 60")
    term.keys("j", "c")  # the queue, then the running job
    term.wait_for("cancel job sleeper? y: yes")
    term.keys("n")
    term.wait_for("not done: cancel job sleeper")
    with open_store(db) as store:
        assert store.get_job("sleeper").state.value == "processing"
    term.keys("c")
    term.wait_for("cancel job sleeper? y: yes")
    term.keys("y")
    term.wait_for("job sleeper: ")
    with open_store(db) as store:
        wait_for(lambda: store.get_job("sleeper").state.value == "cancelled", message="the job cancelled")
    term.wait_for(lambda s: "Running (0)" in s and "cancelled 1" in s, message="the view to show it")
    quit_top(term)


def test_enter_opens_the_job_and_follows_its_output_until_it_ends(term, db, run_cli, workers):
    top_over_a_running_job(term, db, run_cli, workers, "talker", "echo first-line; sleep 60")
    term.keys("j", "Enter")
    shown = term.wait_for(lambda s: "first-line" in s.splitlines(), message="the job's output, a line of its own")
    assert "job talker  queue default  state processing" in shown
    assert "queuectl top - job talker (following; Esc or q: back)" in shown
    assert run_cli("cancel", "talker").exit_code == 0
    shown = term.wait_for(lambda s: "state cancelled" in s, message="the view to show the job ended")
    assert "queuectl top - job talker (Esc or q: back)" in shown  # all its output is shown: nothing to follow
    term.keys("Escape")
    term.wait_for("Running (0)")
    quit_top(term)


def test_slash_filters_by_queue_or_text(term, db, run_cli):
    enqueue(run_cli, id="a1", queue="alpha", command="true")
    enqueue(run_cli, id="b1", queue="beta", command="true")
    start_top(term, db)
    term.wait_for(lambda s: "alpha " in s and "beta " in s, message="both queues")
    term.keys("/")
    term.type("bet")
    term.keys("Enter")
    shown = term.wait_for("filter: bet")
    assert "Queues (1)" in shown and "beta " in shown and "alpha " not in shown
    term.keys("Escape")
    term.wait_for(lambda s: "Queues (2)" in s and "filter:" not in s, message="the filter cleared")
    quit_top(term)


def test_a_resize_is_followed(term, db, run_cli):
    top_over_a_job(term, db, run_cli)
    term.wait_for("LIMIT")
    term.resize(30, 8)
    term.wait_for("terminal too small: need 40x10")
    term.resize(200, 40)
    shown = term.wait_for(lambda s: "Workers (0)" in s.splitlines()[2], message="two columns")
    assert "Queues (1)" in shown.splitlines()[2]
    term.resize(80, 24)
    term.wait_for(lambda s: s.splitlines()[2].rstrip() == "Queues (1)", message="one column again")
    quit_top(term)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_give_the_terminal_back(term, db, run_cli, sig):
    import os

    top_over_a_job(term, db, run_cli)
    os.kill(term.program_pid(), sig)
    shown = given_back(term, 128 + sig)
    assert f"queuectl: top ended by {sig.name}" in shown


def test_ctrl_c_gives_the_terminal_back_with_130(term, db, run_cli):
    start_top(term, db)
    term.keys("C-c")
    shown = given_back(term, 130)
    assert "queuectl: error: interrupted" in shown


def test_read_only_hides_the_actions(term, db, run_cli):
    top_over_a_job(term, db, run_cli, "--read-only")
    shown = term.wait_for("read-only")
    assert "p pause" not in shown
    term.keys("p")
    term.wait_for("read-only: no actions")
    with open_store(db) as store:
        assert store.paused_queues() == {}
    quit_top(term)


def test_without_a_terminal_one_line_and_exit_2(db):
    done = subprocess.run([*QUEUECTL, "--db", db, "top"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert "top draws on a terminal" in done.stderr


def test_a_database_outage_is_said_and_ridden_out(term, pg_server, pg_uri, tmp_path):
    run_cli = Cli(pg_uri)
    enqueue(run_cli, id="j1", command="true")
    start_top(term, pg_uri)
    term.wait_for("pending 1  processing 0")
    try:
        pg_server.stop("fast")
        term.wait_for("database unavailable for", message="the outage said")
    finally:
        if not pg_server.running():
            pg_server.start()
    enqueue(run_cli, id="j2", command="true")
    shown = term.wait_for(lambda s: "pending 2  processing 0" in s and "database unavailable" not in s,
                          message="the view back")
    assert shown.startswith("queuectl top")
    quit_top(term)


def test_an_error_ends_the_view_with_one_line_and_exit_1_the_terminal_given_back(term, db, run_cli):
    import sqlite3

    top_over_a_job(term, db, run_cli)
    with sqlite3.connect(db) as con:  # the queue's table gone behind its back: not an outage, an error
        con.execute("ALTER TABLE queues RENAME TO queues_gone")
    shown = given_back(term, 1)
    joined = shown.replace("\n", "")  # the line wraps at the terminal's width
    assert joined.count("queuectl: error:") == 1 and "queues" in joined.split("queuectl: error:")[1], shown


def test_top_works_through_pgbouncer_in_transaction_pooling(term, pooled):
    enqueue(Cli(pooled), id="j1", command="true")
    start_top(term, pooled)
    term.wait_for("pending 1  processing 0")
    term.keys("p")
    term.wait_for("queue default paused")
    with open_store(pooled) as store:
        assert "default" in store.paused_queues()
    quit_top(term)


def test_a_user_who_may_only_read_a_sqlite_file_gets_the_view_read_only(term, tmp_path):
    """As `nobody` (Debian's python3 and python3-click: root's venv is out of its reach), on a file root owns
    0644 in a directory nobody may not write, while a worker has it open (its -shm file is there)."""
    import os
    import pathlib
    import shutil
    import tempfile

    if os.geteuid() != 0 or not shutil.which("runuser"):
        require("needs root and runuser (util-linux) to run top as nobody", "processes")
    if subprocess.run(["/usr/bin/python3", "-c", "import click"], capture_output=True).returncode != 0:
        require("needs Debian's python3-click for /usr/bin/python3", "processes")
    home = tempfile.mkdtemp(prefix="qtop-ro-", dir="/tmp")
    os.chmod(home, 0o755)
    # A copy of the package that nobody may read: the checkout may lie where it may not (under /root).
    shutil.copytree(pathlib.Path(__file__).parents[2] / "queuectl", f"{home}/src/queuectl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for where, dirs, files in os.walk(f"{home}/src"):
        os.chmod(where, 0o755)
        for name in files:
            os.chmod(os.path.join(where, name), 0o644)
    system_python = ["runuser", "-u", "nobody", "--", "env", "PYTHONDONTWRITEBYTECODE=1", f"PYTHONPATH={home}/src",
                     "/usr/bin/python3", "-m", "queuectl"]
    db = f"{home}/queue.db"
    workers = WorkerProcs(db, tmp_path)
    try:
        enqueue(Cli(db), id="j1", command="true")
        workers.start()
        wait_for(lambda: os.path.exists(db + "-shm"), message="the worker's -shm file")
        start_top(term, db, program=system_python)
        term.wait_for(f"read-only ({db} is not writable)")
        term.keys("p")
        term.wait_for("read-only: no actions")
        with open_store(db) as store:
            assert store.paused_queues() == {}
        quit_top(term)
    finally:
        workers.cleanup()
        shutil.rmtree(home, ignore_errors=True)
