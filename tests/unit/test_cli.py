"""Tier 1: every CLI command in-process (Click's runner) against a real SQLite file.

Jobs reach the states a worker gives them either through a real `worker start --burst`
or through the store's own worker API (register_worker, claim, finish) on the same file.
Every bad input must give one line on stderr, the documented exit code, and leave the
database as it was.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sqlite3
import time
from datetime import datetime

import click
import pytest

from support.cli import assert_error, assert_ok, json_error_position, parse_metrics
from support.engines import snapshot
from support.backdoor import behind_queuectls_back
from queuectl.cli import cli as cli_group

from queuectl.cli import cli
from queuectl.cli.common import LazyGroup
from queuectl.domain.jobspec import FIELDS, MAX_COMMAND_BYTES
from queuectl.domain.settings import SETTINGS
from queuectl.store import is_uri, open_store
from queuectl.store.request import Outcome
from support.worker_steps import claim, finish
from support.engines import BOTH_ENGINES, SQLITE_ONLY

pytestmark = BOTH_ENGINES


DEFAULTS = {
    "max-retries": 3,
    "backoff-base": 2.0,
    "backoff-max": 3600.0,
    "job-timeout": None,
    "heartbeat-interval": 5.0,
    "stale-after": 30.0,
    "poll-interval": 1.0,
    "output-limit": 1048576,
    "keep-completed": 86400.0,
    "keep-cancelled": 86400.0,
    "keep-dead": 604800.0,
    "keep-history": 1209600.0,
}
STATES = ["pending", "processing", "completed", "failed", "dead", "cancelled", "blocked"]


# -- helpers -----------------------------------------------------------------------------------


def json_only(result):
    """The output of a --json command: exit 0, empty stderr, stdout one JSON document."""
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    assert result.stderr == ""
    return json.loads(result.stdout)


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def ids(jobs) -> list[str]:
    return [j["id"] for j in jobs]


WORKER_INFO = {"name": "w1", "host": "testhost", "boot_id": "boot", "pid": 4242, "pid_start": None,
               "slots": 4, "queues": [], "unit": None}


@pytest.fixture
def seeded(run_cli, db):
    """A database with one job and one changed setting; returns its snapshot."""
    assert_ok(run_cli("enqueue", '{"id":"seed","command":"echo seed"}'))
    assert_ok(run_cli("config", "set", "max-retries", "5"))
    return snapshot(db)


@pytest.fixture
def populated(run_cli, db):
    """One job in every state, two queues, one registered worker running r1.

    default: c1 completed, f1 failed, p1 pending; build: d1 dead, r1 processing, p2 pending.
    Enqueue order (seq): c1, f1, d1, r1, p1, p2.
    """
    for spec in ({"id": "c1", "command": "echo out"},
                 {"id": "f1", "command": "exit 1", "max_retries": 2},
                 {"id": "d1", "command": "exit 3", "max_retries": 0, "queue": "build"},
                 {"id": "r1", "command": "sleep 100", "queue": "build"}):
        assert_ok(run_cli("enqueue", json.dumps(spec)))
    with open_store(db) as s:
        now = time.time()
        wid, recovered = s.register_worker(WORKER_INFO, now)
        assert recovered == []
        claimed = claim(s, wid, [], 10, now)
        assert sorted(j.id for j in claimed) == ["c1", "d1", "f1", "r1"]
        states = finish(s, wid, [Outcome("c1", True, 0, None, b"out\n\xff", b"err\n"),
                                Outcome("f1", False, 1, "exit code 1", b"", b"nope\n"),
                                Outcome("d1", False, 3, "exit code 3", b"", b"boom\n")], now)
        assert [st.value for st in states] == ["completed", "failed", "dead"]
    assert_ok(run_cli("enqueue", '{"id":"p1","command":"true"}'))
    assert_ok(run_cli("enqueue", '{"id":"p2","command":"true","queue":"build"}'))


# -- enqueue -----------------------------------------------------------------------------------


def test_enqueue_prints_given_id_and_stores_defaults(run_cli):
    before = time.time()
    assert assert_ok(run_cli("enqueue", '{"id":"job1","command":"echo hi"}')) == "job1\n"
    job = json_only(run_cli("show", "job1", "--json"))
    assert job["command"] == "echo hi"
    assert (job["state"], job["queue"], job["priority"], job["attempts"]) == ("pending", "default", 0, 0)
    assert job["max_retries"] is None and job["timeout"] is None and job["cwd"] is None
    assert job["run_at"] == job["created_at"]
    created = json_only(run_cli("list", "--json"))[0]["created_at"]
    assert abs(_ts(created) - before) < 5


def test_enqueue_generates_distinct_ids(run_cli):
    first = assert_ok(run_cli("enqueue", '{"command":"true"}')).strip()
    second = assert_ok(run_cli("enqueue", '{"command":"true"}')).strip()
    assert re.fullmatch(r"[0-9a-f]{16}", first) and re.fullmatch(r"[0-9a-f]{16}", second)
    assert first != second
    assert sorted(ids(json_only(run_cli("list", "--json")))) == sorted([first, second])
    assert json_only(run_cli("show", first, "--json"))["state"] == "pending"


def test_enqueue_every_field(run_cli):
    spec = {"id": "full", "command": "make -C /srv", "queue": "build", "priority": -7, "max_retries": 9,
            "run_at": "2030-01-01T09:00:00+02:00", "timeout": 600, "cwd": "/tmp"}
    assert_ok(run_cli("enqueue", json.dumps(spec)))
    job = json_only(run_cli("show", "full", "--json"))
    assert job["run_at"] == "2030-01-01T07:00:00.000+00:00"
    assert (job["queue"], job["priority"], job["max_retries"], job["timeout"], job["cwd"]) == \
        ("build", -7, 9, 600.0, "/tmp")
    assert_ok(run_cli("enqueue", '{"id":"later","command":"true","delay":60}'))
    later = json_only(run_cli("show", "later", "--json"))
    assert abs(_ts(later["run_at"]) - _ts(later["created_at"]) - 60) < 0.01
    assert_ok(run_cli("enqueue", '{"id":"zulu","command":"true","run_at":"2030-01-01T00:00:00Z"}'))
    assert json_only(run_cli("show", "zulu", "--json"))["run_at"] == "2030-01-01T00:00:00.000+00:00"


def test_enqueue_command_size_limit_counts_bytes_and_the_nul(run_cli, db):
    # Linux's MAX_ARG_STRLEN (32 pages) counts the terminating NUL: 131,071 bytes of text at most.
    assert MAX_COMMAND_BYTES == 128 * 1024 - 1
    assert_ok(run_cli("enqueue", json.dumps({"id": "big", "command": "x" * MAX_COMMAND_BYTES})))
    assert len(json_only(run_cli("show", "big", "--json"))["command"]) == MAX_COMMAND_BYTES
    before = snapshot(db)
    assert_error(run_cli("enqueue", json.dumps({"command": "x" * (MAX_COMMAND_BYTES + 1)})), 2,
                 "longer than 131071 bytes")
    # 65536 two-byte characters: fewer characters than the limit, more bytes.
    assert_error(run_cli("enqueue", json.dumps({"command": "é" * (MAX_COMMAND_BYTES // 2 + 1)},
                                               ensure_ascii=False)), 2, "longer than 131071 bytes")
    assert snapshot(db) == before


def test_the_longest_command_accepted_runs(run_cli, db):
    # One byte under what enqueue refuses: the shell must get it as one argument and run it.
    command = "exit 0 #" + "x" * (MAX_COMMAND_BYTES - 8)
    assert len(command.encode()) == MAX_COMMAND_BYTES
    assert_ok(run_cli("enqueue", json.dumps({"id": "longest", "command": command, "max_retries": 0})))
    assert run_cli("worker", "start", "--burst").exit_code == 0
    job = json_only(run_cli("show", "longest", "--json"))
    assert (job["state"], job["exit_code"], job["last_error"]) == ("completed", 0, None)


def test_enqueue_file_and_stdin(run_cli, tmp_path):
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"id":"f1","command":"echo 1"}\n\n   \n{"id":"f2","command":"echo 2","queue":"q2"}\r\n'
                    '{"command":"echo 3"}')  # blank lines skipped, CRLF and a missing final newline fine
    out = assert_ok(run_cli("enqueue", "--file", str(path))).splitlines()
    assert out[:2] == ["f1", "f2"] and len(out) == 3 and re.fullmatch(r"[0-9a-f]{16}", out[2])
    out2 = assert_ok(run_cli("enqueue", "--file", "-",
                             input='\n{"id":"s1","command":"a"}\n{"id":"s2","command":"b"}\n'))
    assert out2 == "s1\ns2\n"
    jobs = json_only(run_cli("list", "--json"))
    assert ids(jobs) == ["s2", "s1", out[2], "f2", "f1"]  # newest first
    assert {j["id"]: j["queue"] for j in jobs}["f2"] == "q2"
    assert_ok(run_cli("enqueue", "-f", "-", input=b'{"id":"s3","command":"caf\xc3\xa9"}\n'))
    assert json_only(run_cli("show", "s3", "--json"))["command"] == "café"


# Bad jobs: (JSON text, words the one-line message must contain).
BAD_JOBS = [
    # Where the JSON breaks, as this Python's json module reports it (3.13 and 3.11 differ on the first).
    ('{"command": "x",}', ["malformed JSON", "at " + json_error_position('{"command": "x",}')]),
    ('{"command": "x"', ["malformed JSON", "at " + json_error_position('{"command": "x"')]),
    ("", ["malformed JSON", "at " + json_error_position("")]),
    ("[1, 2]", ["must be a JSON object", "list"]),
    ('"echo hi"', ["must be a JSON object", "str"]),
    ("null", ["must be a JSON object", "null"]),
    ("42", ["must be a JSON object", "int"]),
    ("{}", ["missing field: command"]),
    ('{"id": "x"}', ["missing field: command"]),
    ('{"command": ""}', ["command must not be empty"]),
    ('{"command": "   "}', ["command must not be empty"]),
    ('{"command": 42}', ["command must be a string"]),
    ('{"command": null}', ["command must be a string"]),
    ('{"command": ["echo", "hi"]}', ["command must be a string"]),
    ('{"command": "a\\u0000b"}', ["NUL"]),
    ('{"command": "echo \\ud800"}', ["command must be valid Unicode"]),
    (json.dumps({"command": "x" * (MAX_COMMAND_BYTES + 1)}), ["longer than 131071 bytes"]),
    ('{"command": "x", "retries": 3, "env": {}}', ["unknown field(s) env, retries", "allowed: " + ", ".join(FIELDS)]),
    ('{"command": "x", "max_retries": -1}', ["max_retries must be a whole number from 0 to 2147483647"]),
    ('{"command": "x", "max_retries": 1.5}', ["max_retries must be a whole number from 0 to 2147483647"]),
    ('{"command": "x", "max_retries": 2.0}', ["max_retries must be a whole number from 0 to 2147483647"]),
    ('{"command": "x", "max_retries": "3"}', ["max_retries must be a whole number from 0 to 2147483647"]),
    ('{"command": "x", "max_retries": true}', ["max_retries must be a whole number from 0 to 2147483647"]),
    ('{"command": "x", "run_at": "tomorrow"}', ["run_at is not an ISO-8601 time"]),
    ('{"command": "x", "run_at": "2030-01-01T09:00:00"}', ["run_at needs a UTC offset"]),
    ('{"command": "x", "run_at": 1900000000}', ["run_at must be an ISO-8601 string"]),
    ('{"command": "x", "run_at": "0001-01-01T00:00:00+14:00"}', ["out of range"]),
    ('{"command": "x", "run_at": "2030-01-01T00:00:00Z", "delay": 5}', ["run_at or delay, not both"]),
    ('{"command": "x", "delay": -1}', ["delay must be a number of seconds >= 0"]),
    ('{"command": "x", "delay": "5"}', ["delay must be a number"]),
    ('{"command": "x", "delay": NaN}', ["delay must be a number"]),
    ('{"command": "x", "delay": 1e12}', ["out of range"]),
    ('{"command": "x", "timeout": 0}', ["timeout must be a number of seconds > 0"]),
    ('{"command": "x", "timeout": -5}', ["timeout must be a number of seconds > 0"]),
    ('{"command": "x", "timeout": true}', ["timeout must be a number of seconds > 0"]),
    ('{"command": "x", "cwd": "relative/dir"}', ["cwd must be an absolute path"]),
    ('{"command": "x", "cwd": ""}', ["cwd must be an absolute path"]),
    ('{"command": "x", "cwd": "/tmp/\\udcff"}', ["cwd must be an absolute path"]),
    ('{"command": "x", "id": "has space"}', ["id must be 1-128 characters"]),
    ('{"command": "x", "id": 7}', ["id must be 1-128 characters"]),
    ('{"command": "x", "queue": "a/b"}', ["queue names are 1-64 characters"]),
    ('{"command": "x", "priority": 1.5}', ["priority must be a whole number"]),
    ('{"command": "x", "priority": 99999999999999999999999}', ["priority is out of range"]),
    ('{"command": "x", "max_retries": 2147483648}', ["max_retries must be a whole number from 0 to 2147483647"]),
    ('{"command": "x", "command": "y"}', ["field 'command' is given twice"]),
]


@pytest.mark.parametrize("text, fragments", BAD_JOBS, ids=[f"job{i}" for i in range(len(BAD_JOBS))])
def test_enqueue_bad_job_argument(run_cli, db, seeded, text, fragments):
    assert_error(run_cli("enqueue", text), 2, *fragments)
    assert snapshot(db) == seeded


@pytest.mark.parametrize("text, fragments", [c for c in BAD_JOBS if c[0]],
                         ids=[f"job{i}" for i, c in enumerate(BAD_JOBS) if c[0]])
def test_enqueue_file_bad_line_in_the_middle(run_cli, db, seeded, tmp_path, text, fragments):
    path = tmp_path / "jobs.jsonl"
    path.write_text('{"id":"good1","command":"true"}\n\n' + text + '\n{"id":"good2","command":"true"}\n')
    line = assert_error(run_cli("enqueue", "--file", str(path)), 2, "line 3: ", "nothing was enqueued", *fragments)
    assert line.startswith("queuectl: error: line 3: ")
    assert snapshot(db) == seeded


def test_enqueue_malformed_json_position_on_a_later_line(run_cli, db, seeded):
    text = '{"command": "x",\n "id": "y" "z"}'
    assert json_error_position(text).startswith("line 2 column ")
    assert_error(run_cli("enqueue", text), 2, "malformed JSON", "at " + json_error_position(text))
    assert snapshot(db) == seeded


@pytest.mark.parametrize("args, stdin, fragments", [
    ((), None, ["give a JSON job, --file FILE or -- COMMAND [ARG]..."]),
    (('{"command":"x"}', "--file", "-"), '{"command":"y"}\n', ["not a JSON job and --file"]),
    (("--file", "-"), "", ["no jobs in the file"]),
    (("--file", "-"), "\n  \n\n", ["no jobs in the file"]),
    (("--file", "-"), b'{"id":"u1","command":"a"}\n{"command":"\xff\xfe"}\n', ["line 2: not UTF-8 text", "nothing was enqueued"]),
    (("--file", "/nonexistent/jobs.jsonl"), None, ["No such file"]),
], ids=["neither", "both", "empty-file", "blank-file", "non-utf8-line", "missing-file"])
def test_enqueue_usage_errors(run_cli, db, seeded, args, stdin, fragments):
    assert_error(run_cli("enqueue", *args, input=stdin), 2, *fragments)
    assert snapshot(db) == seeded


def test_enqueue_duplicate_id(run_cli, db, seeded):
    assert_error(run_cli("enqueue", '{"id":"seed","command":"echo other"}'), 1, "'seed' already exists")
    assert snapshot(db) == seeded
    assert json_only(run_cli("show", "seed", "--json"))["command"] == "echo seed"


@pytest.mark.parametrize("lines, bad_line", [
    (['{"id":"a","command":"1"}', '{"id":"b","command":"2"}', "", '{"id":"a","command":"3"}'], 4),
    (['{"id":"a","command":"1"}', '{"id":"seed","command":"2"}', '{"id":"b","command":"3"}'], 2),
    # in the database and repeated in the file: the first line that clashes is the one named
    (['{"id":"x","command":"1"}', '{"id":"seed","command":"2"}', '{"id":"seed","command":"3"}'], 2),
], ids=["inside-file", "against-db", "both"])
def test_enqueue_file_duplicate_id(run_cli, db, seeded, lines, bad_line):
    result = run_cli("enqueue", "--file", "-", input="\n".join(lines) + "\n")
    line = assert_error(result, 1, "already exists", "nothing was enqueued")
    assert line.startswith(f"queuectl: error: line {bad_line}: ")
    assert snapshot(db) == seeded


# -- list, show, logs, status ------------------------------------------------------------------------


def test_list_filters_and_order(run_cli, populated):
    everything = json_only(run_cli("list", "--json"))
    assert ids(everything) == ["p2", "p1", "r1", "d1", "f1", "c1"]
    assert {j["id"]: j["state"] for j in everything} == {
        "c1": "completed", "f1": "failed", "d1": "dead", "r1": "processing", "p1": "pending", "p2": "pending"}
    expected = {"pending": ["p2", "p1"], "processing": ["r1"], "completed": ["c1"], "failed": ["f1"], "dead": ["d1"]}
    for state, want in expected.items():
        assert ids(json_only(run_cli("list", "--state", state, "--json"))) == want
    assert ids(json_only(run_cli("list", "--queue", "build", "--json"))) == ["p2", "r1", "d1"]
    assert ids(json_only(run_cli("list", "--queue", "nope", "--json"))) == []
    assert ids(json_only(run_cli("list", "--state", "pending", "--queue", "build", "--json"))) == ["p2"]
    assert ids(json_only(run_cli("list", "--limit", "2", "--json"))) == ["p2", "p1"]
    assert ids(json_only(run_cli("list", "--state", "pending", "--limit", "1", "--json"))) == ["p2"]


def test_empty_or_special_database_paths_are_refused(run_cli):
    for args in (("--db", ""), ("--db", "/dev/null")):
        r = run_cli.runner.invoke(cli_group, [*args, "status"])
        assert r.exit_code == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("queuectl: error:"), r.stderr


def test_config_get_json(run_cli):
    run_cli("config", "set", "job-timeout", "2.5")
    assert json_only(run_cli("config", "get", "job_timeout", "--json")) == 2.5
    assert json_only(run_cli("config", "get", "max-retries", "--json")) == 3


def test_list_says_on_stderr_when_the_limit_cuts_it_short(run_cli, populated):
    cut = run_cli("list", "--limit", "2")
    assert cut.exit_code == 0 and cut.stderr == "(2 of 6 jobs shown; use --limit for more)\n"
    assert [line.split()[0] for line in cut.stdout.splitlines()[1:]] == ["p2", "p1"]
    assert run_cli("list", "--state", "pending", "--limit", "2").stderr == ""  # exactly 2 pending: nothing cut
    assert run_cli("list", "--queue", "bad queue").exit_code == 2


def test_list_table(run_cli, populated):
    lines = assert_ok(run_cli("list")).splitlines()
    assert lines[0].split() == ["ID", "STATE", "QUEUE", "PRI", "ATTEMPTS", "CREATED", "COMMAND"]
    assert [line.split()[0] for line in lines[1:]] == ["p2", "p1", "r1", "d1", "f1", "c1"]
    assert lines[3].split()[:5] == ["r1", "processing", "build", "0", "1"]
    dead = assert_ok(run_cli("list", "--state", "dead")).splitlines()
    assert len(dead) == 2 and dead[1].split()[:2] == ["d1", "dead"]


def test_list_of_empty_queue(run_cli):
    assert json_only(run_cli("list", "--json")) == []
    assert assert_ok(run_cli("list")).split() == ["ID", "STATE", "QUEUE", "PRI", "ATTEMPTS", "CREATED", "COMMAND"]


def test_show(run_cli, populated):
    job = json_only(run_cli("show", "d1", "--json"))
    assert (job["state"], job["attempts"], job["exit_code"], job["last_error"], job["queue"]) == \
        ("dead", 1, 3, "exit code 3", "build")
    assert job["finished_at"] is not None and "stdout" not in job
    text = assert_ok(run_cli("show", "d1"))
    fields = dict(re.match(r"(\w+):\s*(.*)$", line).groups() for line in text.splitlines() if line[0] != " ")
    assert fields["id"] == "d1" and fields["state"] == "dead" and fields["last_error"] == "exit code 3"
    assert fields["timeout"] == "-" and fields["exit_code"] == "3" and fields["errors"] == "1"
    assert set(fields) == set(job)


def test_show_lists_the_attempts_that_ended_without_completing_oldest_first(run_cli, db):
    assert_ok(run_cli("enqueue", json.dumps({"id": "a", "command": "exit 3", "max_retries": 1})))
    with open_store(db) as s:
        wid = s.register_worker(WORKER_INFO, 1_000_000.0)[0]
        claim(s, wid, [], 1, 1_000_000.0)
        finish(s, wid, [Outcome("a", False, 3, "exit code 3", ended_at=1_000_001.5)], 1_000_002.0)
        claim(s, wid, [], 1, 1_000_100.0)
        finish(s, wid, [Outcome("a", False, None, "cannot start: \x1b[2J\nno such cwd", ended_at=1_000_100.05)],
               1_000_101.0)
    job = json_only(run_cli("show", "a", "--json"))
    assert job["attempts"] == 2 and job["state"] == "dead"
    assert job["errors"] == [
        {"n": 1, "attempt": 1, "outcome": "failed", "end_code": None, "exit_code": 3, "error": "exit code 3",
         "started_at": "1970-01-12T13:46:40.000+00:00", "finished_at": "1970-01-12T13:46:41.500+00:00",
         "duration": 1.5},
        {"n": 2, "attempt": 2, "outcome": "dead", "end_code": None, "exit_code": None,
         "error": "cannot start: \x1b[2J\nno such cwd", "started_at": "1970-01-12T13:48:20.000+00:00",
         "finished_at": "1970-01-12T13:48:20.050+00:00", "duration": pytest.approx(0.05)}]
    lines = assert_ok(run_cli("show", "a")).splitlines()
    assert lines[-3:] == [
        "errors:       2",
        "  attempt 1: failed (exit 3) at 1970-01-12T13:46:41.500+00:00 after 1.5 s: exit code 3",
        "  attempt 2: dead at 1970-01-12T13:48:20.050+00:00 after 50 ms: cannot start: \\x1b[2J\\nno such cwd"]


def test_show_says_never_or_dash_for_unset_fields_and_escapes_control_characters(run_cli):
    command = "printf '\\033[2J' # \x1b[31mred\u202e\nline two"
    assert_ok(run_cli("enqueue", json.dumps({"id": "raw", "command": command})))
    text = assert_ok(run_cli("show", "raw"))
    assert "\x1b" not in text and "\u202e" not in text and len(text.splitlines()) == len(DEFAULT_SHOWN)
    fields = dict(re.match(r"(\w+):\s*(.*)$", line).groups() for line in text.splitlines())
    assert fields["command"] == "printf '\\033[2J' # \\x1b[31mred\\u202e\\nline two"
    assert {k: fields[k] for k in DEFAULT_SHOWN if k not in ("id", "command", "state", "queue", "priority",
                                                              "attempts", "run_at", "created_at", "updated_at")} == {
        "max_retries": "-", "timeout": "-", "cwd": "-", "started_at": "never", "finished_at": "never",
        "exit_code": "-", "last_error": "-", "key": "-", "after": "-", "errors": "-"}
    job = json_only(run_cli("show", "raw", "--json"))  # JSON unchanged: null, and the command as it is
    assert job["command"] == command and job["started_at"] is None and job["after"] == []
    assert list(job) == list(DEFAULT_SHOWN)


DEFAULT_SHOWN = ("id", "queue", "command", "state", "priority", "attempts", "max_retries", "timeout", "cwd", "run_at",
                 "created_at", "updated_at", "started_at", "finished_at", "exit_code", "last_error", "key", "after",
                 "errors")


def test_logs(run_cli, populated):
    result = run_cli("logs", "c1")
    assert result.exit_code == 0
    assert result.stdout_bytes == b"out\n\xff"  # the bytes as the job wrote them
    assert result.stderr_bytes == b"err\n"
    d = json_only(run_cli("logs", "c1", "--json"))
    assert d == {"id": "c1", "state": "completed", "exit_code": 0, "stdout": "out\n\ufffd", "stderr": "err\n"}
    pending = run_cli("logs", "p1")  # never ran: no output, still a success
    assert (pending.exit_code, pending.stdout_bytes, pending.stderr_bytes) == (0, b"", b"")
    assert json_only(run_cli("logs", "p1", "--json"))["stdout"] == ""


def test_status(run_cli, populated):
    s = json_only(run_cli("status", "--json"))
    assert s["jobs"] == {"pending": 2, "processing": 1, "completed": 1, "failed": 1, "dead": 1, "cancelled": 0, "blocked": 0}
    zero = {"pending": 0, "processing": 0, "completed": 0, "failed": 0, "dead": 0, "cancelled": 0, "blocked": 0}
    assert s["queues"] == {"build": {**zero, "dead": 1, "processing": 1, "pending": 1},
                           "default": {**zero, "completed": 1, "failed": 1, "pending": 1}}
    [w] = s["workers"]
    assert (w["name"], w["host"], w["pid"], w["slots"], w["busy"], w["jobs"]) == ("w1", "testhost", 4242, 4, 1, ["r1"])
    assert w["state"] == "running"  # on another host ("testhost"): judged by its fresh heartbeat
    assert 0 <= w["heartbeat_age"] < 60
    text = assert_ok(run_cli("status"))
    assert re.search(r"^pending\s+2$", text, re.M) and re.search(r"^dead\s+1$", text, re.M)
    assert re.search(r"^build\s+1\s+1\s+0\s+0\s+1\s+0\s+0\s+\S+\s+-\s+-$", text, re.M)
    assert "Retention: completed 1d, cancelled 1d, dead 7d" in text
    assert "Workers (1)" in text and re.search(r"^w1\s+running\s+4242\s+testhost\s+1/4\s+\S+s\s+r1$", text, re.M)


def test_status_of_empty_database(run_cli):
    # no systemd runs here (PID 1 is not systemd), so no worker units are listed
    assert json_only(run_cli("status", "--json")) == {
        "jobs": dict.fromkeys(STATES, 0), "queues": {}, "keys": [], "keys_held": 0, "paused": {}, "limits": {},
        "schedules": [], "oldest_ready_age": {},
        "retention": {"completed": 86400.0, "cancelled": 86400.0, "dead": 604800.0, "history": 14 * 86400.0},
        "workers": [], "stopped_workers": [], "units": [],
        "rates": dict.fromkeys(("1m", "5m", "15m"), {"completed": 0.0, "failed": 0.0})}
    text = assert_ok(run_cli("status"))
    assert "Workers (0)" in text and "Queues" not in text and "Stopped" not in text


def test_status_shows_the_workers_that_ended_in_the_last_hour_and_how(run_cli, db):
    assert run_cli("worker", "start", "--burst", "--name", "b1").exit_code == 0
    [w] = json_only(run_cli("status", "--json"))["stopped_workers"]
    assert (w["name"], w["pid"], w["unit"], w["ended"]) == ("b1", os.getpid(), None, "burst")
    assert w["started_at"] <= w["stopped_at"] and abs(_ts(w["stopped_at"]) - time.time()) < 60
    text = assert_ok(run_cli("status"))
    assert "Workers (0)" in text and "Stopped in the last hour (1)" in text
    assert re.search(rf"^b1\s+burst\s+\d+s ago\s+{os.getpid()}\s+\S+\s+-$", text, re.M), text
    with open_store(db) as s:  # more than an hour ago: kept, no longer shown
        s.deregister(s.register_worker({**WORKER_INFO, "name": "old"}, time.time() - 4000)[0], "drained",
                     time.time() - 3700)
    assert [w["name"] for w in json_only(run_cli("status", "--json"))["stopped_workers"]] == ["b1"]


@pytest.mark.parametrize("args", [
    ("list",), ("list", "--state", "dead"), ("show", "c1"), ("logs", "c1"), ("logs", "r1"), ("status",),
    ("dlq", "list"), ("config", "list"),
])
def test_every_json_output_is_only_json(run_cli, populated, args):
    result = run_cli(*args, "--json")
    value = json_only(result)
    assert isinstance(value, (list, dict)) and value
    assert result.stdout.strip().startswith(("[", "{"))


@pytest.mark.parametrize("args, code, fragments", [
    (("show", "nope"), 1, ["no job with id 'nope'"]),
    (("show", "nope", "--json"), 1, ["no job with id 'nope'"]),
    (("logs", "nope"), 1, ["no job with id 'nope'"]),
    (("logs", "nope", "--json"), 1, ["no job with id 'nope'"]),
    (("show",), 2, ["Missing argument 'ID'"]),
    (("show", "\udcff"), 2, ["not valid UTF-8"]),  # non-UTF-8 argv bytes
    (("list", "--state", "bogus"), 2, ["'bogus' is not one of", "'pending'"]),
    (("list", "--state", "PENDING!"), 2, ["is not one of"]),
    (("list", "--limit", "0"), 2, ["--limit"]),
    (("list", "--limit", "x"), 2, ["--limit"]),
    (("list", "--queue", "\udcff"), 2, ["queue names are"]),
    (("list", "--bogus"), 2, ["No such option"]),
    (("status", "--db", "x.db"), 2, ["No such option", "--db goes before the command"]),
    (("list", "--limit", "99999999999999999999999"), 2, ["--limit", "1<=x<=1000000000"]),  # past SQLite's integer
    (("dlq", "list", "--limit", "9223372036854775808"), 2, ["--limit", "1<=x<=1000000000"]),
    (("worker", "start", "--count", "99999999999999999999"), 2, ["--count", "1<=x<=1000"]),
    (("wait", "x", "--timeout", "nan"), 2, ["--timeout", "a time must be a number of seconds or a duration", "'nan'"]),
    (("cancel", "x", "--wait", "inf"), 2, ["--wait", "a time must be a number of seconds or a duration", "'inf'"]),
    (("wait", "x", "--timeout", "-1"), 2, ["--timeout", "a time must be", "'-1'"]),
    (("wait", "x", "--timeout", "10x"), 2, ["--timeout", "a time must be", "'10x'"]),
    (("wait", "x", "--timeout", "forever"), 2, ["--timeout", "a time must be", "'forever'"]),
    (("bogus",), 2, ["No such command 'bogus'"]),
    (("worker", "bogus"), 2, ["No such command 'bogus'"]),
    (("dlq", "list", "--limit", "0"), 2, ["--limit"]),
    (("status", "extra"), 2, ["unexpected extra argument"]),
])
def test_bad_arguments(run_cli, db, populated, args, code, fragments):
    before = snapshot(db)
    assert_error(run_cli(*args), code, *fragments)
    assert snapshot(db) == before


# -- a real worker, in-process -----------------------------------------------------------------------


def test_burst_worker_runs_jobs_to_completed_and_dead(run_cli, db):
    assert_ok(run_cli("enqueue", '{"id":"good","command":"echo hi; echo err >&2"}'))
    assert_ok(run_cli("enqueue", '{"id":"bad","command":"echo boom >&2; exit 3","max_retries":0,"queue":"build"}'))
    assert_ok(run_cli("enqueue", '{"id":"other","command":"true","queue":"elsewhere"}'))
    result = run_cli("worker", "start", "--burst", "--count", "2", "--queue", "default", "--queue", "build",
                     "--name", "burst-1")
    assert result.exit_code == 0, result.stderr
    assert json_only(run_cli("show", "good", "--json"))["state"] == "completed"
    logs = run_cli("logs", "good")
    assert (logs.stdout_bytes, logs.stderr_bytes) == (b"hi\n", b"err\n")
    bad = json_only(run_cli("show", "bad", "--json"))
    assert (bad["state"], bad["attempts"], bad["exit_code"], bad["last_error"]) == ("dead", 1, 3, "exit code 3")
    assert json_only(run_cli("show", "other", "--json"))["state"] == "pending"  # not a queue it serves
    status = json_only(run_cli("status", "--json"))
    assert status["workers"] == []  # deregistered after a clean stop
    assert status["jobs"] == {"pending": 1, "processing": 0, "completed": 1, "failed": 0, "dead": 1, "cancelled": 0, "blocked": 0}


@pytest.mark.parametrize("args, fragments", [
    (("--count", "0"), ["--count", "0 is not in the range"]),
    (("--count", "-1"), ["--count", "-1 is not in the range"]),
    (("-c", "two"), ["--count", "'two' is not a valid integer"]),
    (("--name", "bad name"), ["worker name must be"]),
    (("--name", ""), ["worker name must be"]),
])
def test_worker_start_bad_arguments(run_cli, db, seeded, args, fragments):
    assert_error(run_cli("worker", "start", "--burst", *args), 2, *fragments)
    assert snapshot(db) == seeded


# -- dead letter queue ------------------------------------------------------------------------------


def test_dlq_list(run_cli, populated):
    dead = json_only(run_cli("dlq", "list", "--json"))
    assert ids(dead) == ["d1"]
    assert (dead[0]["last_error"], dead[0]["attempts"], dead[0]["state"]) == ("exit code 3", 1, "dead")
    lines = assert_ok(run_cli("dlq", "list")).splitlines()
    assert lines[0].split()[:3] == ["ID", "QUEUE", "ATTEMPTS"]
    assert len(lines) == 2 and lines[1].split()[:3] == ["d1", "build", "1"] and "exit code 3" in lines[1]


def test_dlq_list_empty(run_cli):
    assert json_only(run_cli("dlq", "list", "--json")) == []


def _kill_one_more(run_cli, db, job_id):
    """Make a second dead job through the store's worker API."""
    assert_ok(run_cli("enqueue", json.dumps({"id": job_id, "command": "false", "max_retries": 0, "priority": 99})))
    with open_store(db) as s:
        wid, _ = s.register_worker({**WORKER_INFO, "name": "w2"}, time.time())
        [job] = claim(s, wid, [], 1, time.time())
        assert job.id == job_id
        assert [st.value for st in finish(s, wid, [Outcome(job_id, False, 1, "exit code 1")], time.time())] == ["dead"]


def test_dlq_retry(run_cli, db, populated):
    _kill_one_more(run_cli, db, "d2")
    before = time.time()
    assert assert_ok(run_cli("dlq", "retry", "d1", "d2")) == "d1: pending\nd2: pending\n"
    for job_id in ("d1", "d2"):
        job = json_only(run_cli("show", job_id, "--json"))
        assert (job["state"], job["attempts"]) == ("pending", 0)
        assert _ts(job["run_at"]) >= before - 1  # ready now
    assert json_only(run_cli("dlq", "list", "--json")) == []
    assert json_only(run_cli("status", "--json"))["jobs"]["dead"] == 0
    # The retried job can be claimed again at once.
    with open_store(db) as s:
        wid, _ = s.register_worker({**WORKER_INFO, "name": "w3"}, time.time())
        assert "d1" in [j.id for j in claim(s, wid, ["build"], 10, time.time())]


@pytest.mark.parametrize("args, code, fragments", [
    (("d1", "c1"), 1, ["job 'c1' is completed, not dead"]),
    (("p1",), 1, ["job 'p1' is pending, not dead"]),
    (("r1",), 1, ["job 'r1' is processing, not dead"]),
    (("f1",), 1, ["job 'f1' is failed, not dead"]),
    (("d1", "nope"), 1, ["no job with id 'nope'"]),
    (("nope",), 1, ["no job with id 'nope'"]),
    (("\udcff",), 2, ["not valid UTF-8"]),
    ((), 2, ["Missing argument 'ID...'"]),
])
def test_dlq_retry_all_or_none(run_cli, db, populated, args, code, fragments):
    before = snapshot(db)
    assert_error(run_cli("dlq", "retry", *args), code, *fragments)
    assert snapshot(db) == before
    assert json_only(run_cli("show", "d1", "--json"))["state"] == "dead"


# -- config -------------------------------------------------------------------------------------------


def test_config_defaults(run_cli):
    values = json_only(run_cli("config", "list", "--json"))
    assert values == DEFAULTS
    assert [type(v) for v in values.values()] == [type(v) for v in DEFAULTS.values()]
    lines = assert_ok(run_cli("config", "list")).splitlines()
    assert lines[0].split() == ["KEY", "VALUE", "MEANING"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert rows == {"max-retries": "3", "backoff-base": "2", "backoff-max": "3600", "job-timeout": "none",
                    "heartbeat-interval": "5", "stale-after": "30", "poll-interval": "1", "output-limit": "1048576",
                    "keep-completed": "1d", "keep-cancelled": "1d", "keep-dead": "7d",
                    "keep-history": "14d"}
    for key in DEFAULTS:
        assert assert_ok(run_cli("config", "get", key)) == rows[key] + "\n"


@pytest.mark.parametrize("key, raw, canonical, shown, stored", [
    ("max-retries", "5", "max-retries", "5", 5),
    ("max_retries", "0", "max-retries", "0", 0),
    ("MAX_RETRIES", " 7 ", "max-retries", "7", 7),
    ("backoff_base", "1.5", "backoff-base", "1.5", 1.5),
    ("backoff-base", "1", "backoff-base", "1", 1.0),
    ("backoff-max", "1234567", "backoff-max", "1234567", 1234567.0),  # shown exactly, not 1.23457e+06
    ("backoff-max", "0", "backoff-max", "0", 0.0),
    ("job-timeout", "600", "job-timeout", "600", 600.0),
    ("job_timeout", "0.25", "job-timeout", "0.25", 0.25),
    ("job-timeout", "none", "job-timeout", "none", None),
    ("heartbeat_interval", "0.05", "heartbeat-interval", "0.05", 0.05),
    ("stale-after", "10.5", "stale-after", "10.5", 10.5),
    ("poll_interval", "0.01", "poll-interval", "0.01", 0.01),
    ("output-limit", "0", "output-limit", "0", 0),
    ("keep-completed", "12h", "keep-completed", "12h", 43200.0),
    ("keep-completed", "43200", "keep-completed", "12h", 43200.0),
    ("keep_cancelled", "90s", "keep-cancelled", "90s", 90.0),
    ("keep-cancelled", "120", "keep-cancelled", "2m", 120.0),
    ("keep-dead", "forever", "keep-dead", "forever", None),
    ("keep-dead", "2.5", "keep-dead", "2.5s", 2.5),
    ("keep-dead", "0", "keep-dead", "0s", 0.0),
])
def test_config_set_get(run_cli, key, raw, canonical, shown, stored):
    assert assert_ok(run_cli("config", "set", key, raw)) == f"{canonical} = {shown}\n"
    assert assert_ok(run_cli("config", "get", key)) == shown + "\n"
    assert assert_ok(run_cli("config", "get", canonical.replace("-", "_"))) == shown + "\n"
    values = json_only(run_cli("config", "list", "--json"))
    assert values == {**DEFAULTS, canonical: stored}
    assert type(values[canonical]) is type(stored)
    # What `get` prints reads back as the same value.
    assert_ok(run_cli("config", "set", canonical, shown))
    assert json_only(run_cli("config", "list", "--json"))[canonical] == stored


def test_config_is_shared_and_persistent(run_cli, db):
    assert_ok(run_cli("config", "set", "job-timeout", "42"))
    with open_store(db) as s:
        assert s.settings()["job-timeout"] == 42.0
    assert_ok(run_cli("config", "set", "job-timeout", "none"))
    with open_store(db) as s:
        assert s.settings()["job-timeout"] is None


@pytest.mark.parametrize("args, fragments", [
    (("set", "max-retries", "-1"), ["max-retries must be a whole number from 0 to 2147483647", "'-1'"]),
    (("set", "max-retries", "1.5"), ["max-retries must be a whole number from 0 to 2147483647"]),
    (("set", "max-retries", "abc"), ["max-retries must be a whole number from 0 to 2147483647"]),
    (("set", "max-retries", "true"), ["max-retries must be"]),
    (("set", "max-retries", "none"), ["max-retries must be"]),
    (("set", "max-retries", ""), ["max-retries must be"]),
    (("set", "backoff-base", "0.5"), ["backoff-base must be a number >= 1"]),
    (("set", "backoff-base", "nan"), ["backoff-base must be a number"]),
    (("set", "backoff-max", "-1"), ["backoff-max must be a number from 0 to 31622400"]),
    (("set", "backoff-max", "1e308"), ["backoff-max must be a number from 0 to 31622400"]),  # past dates shown
    (("set", "backoff-max", "inf"), ["backoff-max must be a number"]),
    (("set", "job-timeout", "0"), ["job-timeout must be a number > 0 and at most 31622400 or 'none'"]),
    (("set", "job-timeout", "1e9"), ["job-timeout must be a number > 0 and at most 31622400"]),
    (("set", "job-timeout", "-3"), ["job-timeout must be"]),
    (("set", "heartbeat-interval", "0.01"), ["heartbeat-interval must be a number from 0.05 to 86400"]),
    (("set", "heartbeat-interval", "1e300"), ["heartbeat-interval must be a number from 0.05 to 86400"]),
    (("set", "stale-after", "0"), ["stale-after must be a number > 0 and at most 31622400"]),
    (("set", "stale-after", "1e308"), ["stale-after must be a number > 0 and at most 31622400"]),
    (("set", "poll-interval", "0"), ["poll-interval must be a number from 0.01 to 86400"]),
    (("set", "poll-interval", "1e308"), ["poll-interval must be a number from 0.01 to 86400"]),  # a worker stalled
    (("set", "output-limit", "1e6"), ["output-limit must be a whole number from 0 to 1000000000"]),
    (("set", "output-limit", "-1"), ["output-limit must be a whole number from 0 to 1000000000"]),
    (("set", "output-limit", "99999999999999999999999"), ["output-limit must be a whole number from 0 to"]),
    (("set", "keep-dead", "99999999999999w"), ["keep-dead is at most 36500d (a century), or 'forever'"]),
    (("set", "keep-completed", "-1s"), ["keep-completed must be a number of seconds or a duration such as 90s"]),
    (("set", "keep-dead", "1y"), ["keep-dead must be a number of seconds or a duration"]),
    (("set", "keep-cancelled", "soon"), ["keep-cancelled must be", "'soon'"]),
    # stale-after must exceed twice heartbeat-interval (defaults 5 and 30)
    (("set", "stale-after", "10"), ["stale-after (10 s) must exceed 2 x heartbeat-interval (5 s)"]),
    (("set", "stale-after", "9.99"), ["must exceed 2 x heartbeat-interval"]),
    (("set", "heartbeat-interval", "15"), ["stale-after (30 s) must exceed 2 x heartbeat-interval (15 s)"]),
    (("set", "retries", "3"), ["unknown config key 'retries'", "known keys: " + ", ".join(SETTINGS)]),
    (("set", "max--retries", "3"), ["unknown config key"]),
    (("get", "retries"), ["unknown config key 'retries'", "max-retries"]),
    (("get", ""), ["unknown config key"]),
    (("set", "max-retries"), ["Missing argument 'VALUE'"]),
    (("get",), ["Missing argument 'KEY'"]),
    (("list", "extra"), ["unexpected extra argument"]),
])
def test_config_bad_input(run_cli, db, seeded, args, fragments):
    before = json_only(run_cli("config", "list", "--json"))
    assert_error(run_cli("config", *args), 2, *fragments)
    assert json_only(run_cli("config", "list", "--json")) == before == {**DEFAULTS, "max-retries": 5}
    assert snapshot(db) == seeded


def test_config_rule_checks_the_stored_partner(run_cli, db):
    assert_ok(run_cli("config", "set", "heartbeat-interval", "1"))
    assert_ok(run_cli("config", "set", "stale-after", "2.5"))
    before = snapshot(db)
    assert_error(run_cli("config", "set", "heartbeat-interval", "1.25"), 2, "stale-after (2.5 s)")
    assert snapshot(db) == before
    assert_ok(run_cli("config", "set", "heartbeat-interval", "1.2"))
    assert json_only(run_cli("config", "list", "--json"))["heartbeat-interval"] == 1.2


def _store_raw_config(db, key, value):
    behind_queuectls_back(
        db, "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value))


@pytest.mark.parametrize("key, value, fragment", [
    ("max-retries", '"lots"', "the stored value of max-retries is invalid"),
    ("max-retries", "-1", "the stored value of max-retries is invalid"),
    ("backoff-base", "0.5", "the stored value of backoff-base is invalid"),
    ("poll-interval", "not json", "is not a JSON value"),
    ("bogus-key", "1", "the database holds an unknown setting 'bogus-key'"),
])
def test_stored_config_made_invalid_by_hand(run_cli, db, seeded, key, value, fragment):
    if key == "max-retries":
        assert behind_queuectls_back(db, "UPDATE config SET value = ? WHERE key = 'max-retries'", (value,)) == 1
    else:
        _store_raw_config(db, key, value)
    broken = snapshot(db)
    for args in (("config", "list"), ("config", "list", "--json"), ("config", "get", "output-limit"),
                 ("worker", "start", "--burst")):
        assert_error(run_cli(*args), 78, fragment)
    assert snapshot(db) == broken  # the worker neither registered nor ran the seed job
    assert json_only(run_cli("status", "--json"))["jobs"]["pending"] == 1  # jobs stay readable
    if key in SETTINGS:  # `config set` of the broken key repairs it
        assert_ok(run_cli("config", "set", key, str(DEFAULTS[key])))
        assert json_only(run_cli("config", "list", "--json"))[key] == DEFAULTS[key]


def test_stored_config_breaking_the_heartbeat_rule_stops_workers(run_cli, db, seeded):
    _store_raw_config(db, "stale-after", "8")
    _store_raw_config(db, "heartbeat-interval", "4")
    broken = snapshot(db)
    assert_error(run_cli("worker", "start", "--burst"), 78, "stale-after (8 s) must exceed 2 x heartbeat-interval (4 s)")
    assert snapshot(db) == broken


# -- help and version ---------------------------------------------------------------------------------


def _command_paths(group: click.Group, prefix=()):
    yield prefix
    for name in group.list_commands(None):  # the top level loads its commands lazily
        command = group.get_command(None, name)
        if isinstance(command, click.Group):
            yield from _command_paths(command, (*prefix, name))
        else:
            yield (*prefix, name)


COMMAND_PATHS = list(_command_paths(cli))


def test_every_command_is_covered():
    assert sorted(" ".join(p) for p in COMMAND_PATHS) == sorted([
        "", "enqueue", "list", "show", "logs", "status", "worker", "worker start", "worker stop",
        "dlq", "dlq list", "dlq retry", "config", "config set", "config get", "config list",
        "cancel", "retry", "pause", "resume", "purge", "metrics", "wait", "limit", "schedule", "schedule add",
        "history", "top", "web", "web-user", "web-user set", "web-user rm", "web-user list",
        "schedule list", "schedule rm", "schedule pause", "schedule resume"])


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=[" ".join(p) or "queuectl" for p in COMMAND_PATHS])
def test_help_has_an_example(run_cli, db, path):
    for flag in ("--help", "-h"):
        result = run_cli(*path, flag)
        assert result.exit_code == 0 and result.stderr == ""
        text = result.stdout
        assert text.startswith(" ".join(["Usage:", "cli", *path, ""]))  # the runner names the program "cli"
        assert re.search(r"^\s+Examples?:\n\s+queuectl \w", text, re.M), text
    assert not os.path.exists(db)  # help opens no database


@pytest.mark.parametrize("group, subcommands", [
    ((), ["enqueue", "list", "status", "worker", "dlq", "config"]),
    (("worker",), ["start", "stop"]),
    (("dlq",), ["list", "retry"]),
    (("config",), ["get", "list", "set"]),
], ids=["queuectl", "worker", "dlq", "config"])
def test_a_group_without_a_subcommand_prints_its_help(run_cli, db, group, subcommands):
    result = run_cli(*group)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == run_cli(*group, "--help").stdout  # the group's help, on stdout
    listed = result.stdout.split("Commands:\n", 1)[1]
    assert all(re.search(rf"^  {name}\s", listed, re.M) for name in subcommands), listed
    assert not os.path.exists(db)


def _lazy_groups():
    """Each LazyGroup of the command line and its path: the top level, `worker`."""
    for path in COMMAND_PATHS:
        command = cli
        for name in path:
            command = command.get_command(None, name)
        if isinstance(command, LazyGroup):
            yield path, command


@pytest.mark.parametrize("group", [group for _, group in _lazy_groups()],
                         ids=[" ".join(path) or "queuectl" for path, _ in _lazy_groups()])
def test_a_command_table_gives_each_command_its_own_short_help(group):
    # A group's help lists its commands by the table's short help without importing them: it must be the
    # command's own, at every width the listing may give it (Click cuts it to fit, with "...").
    assert group.table
    for name, (where, short_help) in group.table.items():
        command = group.get_command(None, name)
        module, attr = where.split(":")
        assert command is getattr(importlib.import_module(module), attr), name
        assert short_help == command.get_short_help_str(10**6), name
        for limit in range(20, 130):
            assert click.Command(name, help=short_help).get_short_help_str(limit) == command.get_short_help_str(limit)


def test_version(run_cli, db):
    result = run_cli("--version")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout == f"queuectl, version {importlib.metadata.version('queuectl')}\n"
    assert not os.path.exists(db)


# -- the database file -------------------------------------------------------------------------------


def test_queuectl_db_env_var_is_honoured(run_cli, tmp_path):
    env_db = tmp_path / "from-env.db"
    runner = run_cli.runner
    result = runner.invoke(cli, ["enqueue", '{"id":"e1","command":"true"}'], env={"QUEUECTL_DB": str(env_db)})
    assert (result.exit_code, result.stdout) == (0, "e1\n"), result.stderr
    assert env_db.exists() and not os.path.exists(run_cli.db)
    with open_store(str(env_db)) as s:
        assert s.get_job("e1").command == "true"
    listed = runner.invoke(cli, ["list", "--json"], env={"QUEUECTL_DB": str(env_db)})
    assert ids(json.loads(listed.stdout)) == ["e1"]
    # --db wins over the variable.
    result = run_cli("enqueue", '{"id":"e2","command":"true"}', env={"QUEUECTL_DB": str(env_db)})
    assert result.exit_code == 0
    assert ids(json_only(run_cli("list", "--json"))) == ["e2"]
    with open_store(str(env_db)) as s:
        assert [j.id for j in s.list_jobs()] == ["e1"]


def test_default_db_path_under_xdg_data_home(run_cli, tmp_path):
    xdg = tmp_path / "xdg"
    result = run_cli.runner.invoke(cli, ["enqueue", '{"id":"x1","command":"true"}'],
                                   env={"QUEUECTL_DB": None, "XDG_DATA_HOME": str(xdg)})
    assert result.exit_code == 0, result.stderr
    path = xdg / "queuectl" / "queuectl.db"
    with open_store(str(path)) as s:
        assert s.get_job("x1").state.value == "pending"


def _dir_state(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


@pytest.mark.parametrize("args", [("status",), ("enqueue", '{"command":"true"}'), ("config", "list", "--json")])
def test_db_in_missing_directory(run_cli, tmp_path, args):
    missing = tmp_path / "no" / "such"
    result = run_cli.runner.invoke(cli, ["--db", str(missing / "q.db"), *args])
    assert_error(result, 2, f"database directory {missing} does not exist")
    assert not (tmp_path / "no").exists()


def test_db_path_is_a_directory(run_cli, tmp_path):
    result = run_cli.runner.invoke(cli, ["--db", str(tmp_path), "status"])
    assert_error(result, 2, "is a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses file permissions, so nothing is unwritable")
def test_db_in_unwritable_directory(run_cli, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = run_cli.runner.invoke(cli, ["--db", str(locked / "q.db"), "enqueue", '{"command":"true"}'])
        assert_error(result, 2, "cannot write to database directory", "permission denied")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def _foreign_sqlite(path, user_version=0, application_id=0):
    con = sqlite3.connect(path)
    with con:
        con.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT)")  # a name queuectl also uses
        con.execute("CREATE TABLE users (name TEXT)")
        con.execute("INSERT INTO users VALUES ('bob')")
        con.execute(f"PRAGMA user_version = {user_version}")
        con.execute(f"PRAGMA application_id = {application_id}")
    con.close()


@pytest.mark.parametrize("kind", ["random-bytes", "text", "sqlite-v0", "sqlite-v1", "sqlite-v7", "sqlite-app-id"])
@pytest.mark.parametrize("args", [("status",), ("enqueue", '{"command":"true"}'),
                                  ("config", "set", "max-retries", "4"), ("worker", "start", "--burst")])
def test_db_that_is_not_a_queuectl_database(run_cli, tmp_path, kind, args):
    path = tmp_path / "other.db"
    if kind == "random-bytes":
        path.write_bytes(os.urandom(8192))
    elif kind == "text":
        path.write_text("just some notes\n" * 100)
    else:
        version, app_id = {"sqlite-v0": (0, 0), "sqlite-v1": (1, 0), "sqlite-v7": (7, 0),
                           "sqlite-app-id": (0, 0x12345678)}[kind]
        _foreign_sqlite(path, version, app_id)
    before = _dir_state(tmp_path)
    result = run_cli.runner.invoke(cli, ["--db", str(path), *args])
    assert_error(result, 2, str(path), "not a queuectl database")
    assert _dir_state(tmp_path) == before  # byte for byte, and no -wal/-shm/-journal left behind


@SQLITE_ONLY
def test_empty_file_becomes_a_queuectl_database(run_cli, db):
    open(db, "wb").close()
    assert assert_ok(run_cli("enqueue", '{"id":"z","command":"true"}')) == "z\n"
    assert json_only(run_cli("status", "--json"))["jobs"]["pending"] == 1


def test_a_configuration_file_named_by_the_environment_must_exist(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "QUEUECTL_CONFIG": str(tmp_path / "typo.conf"), "XDG_DATA_HOME": str(tmp_path / "data")}
    r = subprocess.run([sys.executable, "-m", "queuectl", "status"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 78 and r.stdout == "", r
    assert r.stderr == f"queuectl: error: QUEUECTL_CONFIG names {tmp_path / 'typo.conf'}, which does not exist\n"
    assert not (tmp_path / "data").exists()  # no private queue made in its place


def test_enqueue_imports_neither_the_worker_nor_click_commands_it_does_not_run(db):
    import subprocess
    import sys

    script = ("import atexit, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr));"
              "from queuectl.cli import main; main()")
    r = subprocess.run([sys.executable, "-c", script, "--db", db, "enqueue", '{"command":"true"}'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    imported = set(r.stderr.split())
    assert "queuectl.cli.enqueue" in imported and "queuectl.store" in imported
    unneeded = {"queuectl.worker", "queuectl.host.runner", "queuectl.cli.worker", "queuectl.cli.dlq", "queuectl.host.notify",
                "configparser", "queuectl.cli.jobs", "queuectl.cli.status"}
    if is_uri(db):
        assert "psycopg" in imported
    else:  # psycopg (and the socket and subprocess modules it brings) only for PostgreSQL
        unneeded |= {"psycopg", "queuectl.store.postgres", "socket", "subprocess"}
    assert not imported & unneeded, imported & unneeded


# -- cancel, retry, pause, resume ------------------------------------------------------------------------


def test_cancel_pending_failed_and_running_jobs(run_cli, populated):
    # r1 runs on a worker of another host that never acts here: --wait 0 reports the request.
    r = run_cli("cancel", "p1", "f1", "r1", "--wait", "0")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["p1: cancelled", "f1: cancelled",
                                     "r1: cancel requested; worker w1 is stopping it"]
    assert [json_only(run_cli("show", j, "--json"))["state"] for j in ("p1", "f1", "r1")] == [
        "cancelled", "cancelled", "processing"]
    report = json_only(run_cli("cancel", "r1", "--wait", "0", "--json"))  # asking again: still requested, no error
    assert report == [{"id": "r1", "was": "processing", "state": "processing", "worker": "w1", "error": None}]
    assert json_only(run_cli("list", "--state", "cancelled", "--json"))[0]["last_error"] == "cancelled"


def test_cancel_by_filter(run_cli, populated):
    r = run_cli("cancel", "--queue", "build", "--state", "pending")
    assert (r.exit_code, r.stdout) == (0, "p2: cancelled\n")
    r = run_cli("cancel", "--queue", "nosuch")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "no jobs to cancel\n")
    assert json_only(run_cli("show", "p1", "--json"))["state"] == "pending"  # another queue


@pytest.mark.parametrize("args, code, fragments", [
    (("cancel",), 2, ["give the ids of the jobs to cancel, or --queue and/or --state"]),
    (("cancel", "p1", "--queue", "build"), 2, ["give job ids, or --queue/--state, not both"]),
    (("cancel", "--state", "dead"), 2, ["'dead' is not one of"]),
    (("cancel", "--queue", "bad queue!"), 2, ["queue names are"]),
    (("cancel", "c1"), 1, ["job 'c1' is completed; only pending, blocked, failed and processing jobs can be cancelled"]),
    (("cancel", "d1"), 1, ["job 'd1' is dead"]),
    (("cancel", "nope"), 1, ["no job with id 'nope'"]),
    (("retry",), 2, ["Missing argument 'ID...'"]),
    (("retry", "p1"), 1, ["job 'p1' is pending, not dead or cancelled"]),
    (("retry", "nope"), 1, ["no job with id 'nope'"]),
    (("pause",), 2, ["Missing argument 'QUEUE...'"]),
    (("pause", "no/slash"), 2, ["queue names are"]),
    (("resume", ""), 2, ["queue names are"]),
])
def test_operator_commands_bad_input(run_cli, db, populated, args, code, fragments):
    before = snapshot(db)
    assert_error(run_cli(*args), code, *fragments)
    assert snapshot(db) == before


def test_cancel_reports_each_id_and_changes_the_good_ones(run_cli, populated):
    r = run_cli("cancel", "p1", "c1", "nope")
    assert r.exit_code == 1 and r.stdout == "p1: cancelled\n"
    assert r.stderr.splitlines() == [
        "queuectl: error: job 'c1' is completed; only pending, blocked, failed and processing jobs can be cancelled",
        "queuectl: error: no job with id 'nope'"]
    assert json_only(run_cli("show", "p1", "--json"))["state"] == "cancelled"


def test_retry_puts_dead_and_cancelled_jobs_back(run_cli, populated):
    assert_ok(run_cli("cancel", "p1"))
    assert assert_ok(run_cli("retry", "p1", "d1")) == "p1: pending\nd1: pending\n"
    for job_id in ("p1", "d1"):
        job = json_only(run_cli("show", job_id, "--json"))
        assert (job["state"], job["attempts"]) == ("pending", 0)
    assert_error(run_cli("dlq", "retry", "c1"), 1, "not dead")


def test_pause_and_resume(run_cli, db, populated):
    assert assert_ok(run_cli("pause", "build", "build", "later")) == "build: paused\nlater: paused\n"
    assert assert_ok(run_cli("pause", "build")) == "build: already paused\n"
    s = json_only(run_cli("status", "--json"))
    assert sorted(s["paused"]) == ["build", "later"]
    assert re.search(r"^build\s.*\syes\s+-$", assert_ok(run_cli("status")), re.M)
    assert_ok(run_cli("enqueue", '{"id":"np","command":"true","queue":"build"}'))  # enqueue still works
    r = run_cli("worker", "start", "--burst", "--queue", "build")  # only paused work: exits at once
    assert r.exit_code == 0 and json_only(run_cli("show", "np", "--json"))["state"] == "pending"
    assert assert_ok(run_cli("resume", "build", "other")) == "build: resumed\nother: not paused\n"
    assert list(json_only(run_cli("status", "--json"))["paused"]) == ["later"]
    assert run_cli("worker", "start", "--burst", "--queue", "build").exit_code == 0
    assert json_only(run_cli("show", "np", "--json"))["state"] == "completed"


# -- purge ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, fragments", [
    (("purge", "--state", "pending"), ["'pending' is not one of 'completed', 'cancelled', 'dead'"]),
    (("purge", "--state", "failed"), ["'failed' is not one of"]),
    (("purge", "--older-than", "soon"), ["--older-than must be a number of seconds or a duration such as 90s,"
                                         " 12h or 7d, got 'soon'"]),  # 'forever' not offered: refused
    (("purge", "--older-than", "-5"), ["--older-than must be"]),
    (("purge", "--older-than", "forever"), ["--older-than forever would delete nothing"]),
    (("purge", "--queue", "a b"), ["queue names are"]),
])
def test_purge_bad_input(run_cli, db, populated, args, fragments):
    before = snapshot(db)
    assert_error(run_cli(*args), 2, *fragments)
    assert snapshot(db) == before


def test_cancel_json_with_nothing_to_cancel_prints_an_empty_list(run_cli, db, populated):
    before = snapshot(db)
    r = run_cli("cancel", "--queue", "nosuch", "--json")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "[]\n", "no jobs to cancel\n")
    assert snapshot(db) == before


def test_purge_by_state_age_and_queue(run_cli, db, populated):
    assert assert_ok(run_cli("purge", "--dry-run")) == "would remove 0 job(s)\n"  # younger than a day
    assert assert_ok(run_cli("purge", "--older-than", "0", "--dry-run")) == "would remove 2 job(s)\n"
    assert assert_ok(run_cli("purge", "--older-than", "0", "--queue", "build")) == "removed 1 job(s)\n"  # d1
    assert assert_ok(run_cli("purge", "--older-than", "0", "--state", "completed")) == "removed 1 job(s)\n"  # c1
    assert sorted(j["id"] for j in json_only(run_cli("list", "--json"))) == ["f1", "p1", "p2", "r1"]
    assert assert_ok(run_cli("enqueue", '{"id":"c1","command":"true"}')) == "c1\n"  # its id is free again


def _without_auto_vacuum(db):
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    conn.close()


@SQLITE_ONLY
def test_purge_compacts_an_older_database_once(run_cli, db, populated):
    _without_auto_vacuum(db)
    r = run_cli("purge")
    assert r.exit_code == 0 and r.stdout.startswith("removed 0 job(s)\ncompacted ") and r.stderr == ""
    assert sqlite3.connect(db).execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert assert_ok(run_cli("purge")) == "removed 0 job(s)\n"  # once


@SQLITE_ONLY
def test_purge_says_in_one_line_when_compacting_lacks_disk(run_cli, db, populated, monkeypatch):
    import os as os_module

    _without_auto_vacuum(db)
    real = os_module.statvfs
    monkeypatch.setattr(os_module, "statvfs", lambda p: os_module.statvfs_result(
        (*real(p)[:4], 0, *real(p)[5:])))  # f_bavail 0: a disk that is full
    r = run_cli("purge")
    assert r.exit_code == 0 and r.stdout == "removed 0 job(s)\n"
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("not compacted: converting") and "MiB free" in r.stderr
    assert sqlite3.connect(db).execute("PRAGMA auto_vacuum").fetchone()[0] == 0


# -- metrics ---------------------------------------------------------------------------------------------------


def test_metrics_parse_and_count(run_cli, db, populated, tmp_path):
    assert_ok(run_cli("pause", "build"))
    text = assert_ok(run_cli("metrics"))
    m = parse_metrics(text)  # a real Prometheus parser
    assert m[("queuectl_jobs", (("queue", "build"), ("state", "dead")))] == 1
    assert m[("queuectl_jobs", (("queue", "default"), ("state", "cancelled")))] == 0  # zeros are written
    assert m[("queuectl_queue_paused", (("queue", "build"),))] == 1
    assert m[("queuectl_queue_paused", (("queue", "default"),))] == 0
    assert m[("queuectl_queue_oldest_ready_age_seconds", (("queue", "default"),))] >= 0
    assert m[("queuectl_workers", (("state", "running"),))] == 1
    assert m[("queuectl_worker_slots", (("kind", "busy"),))] == 1 and m[("queuectl_worker_slots", (("kind", "total"),))] == 4
    assert m[("queuectl_job_runs_total", (("outcome", "completed"), ("queue", "default")))] == 1
    assert "# TYPE queuectl_job_runs_total counter" in text
    assert_ok(run_cli("purge", "--older-than", "0"))  # retention does not lower the counters
    assert parse_metrics(assert_ok(run_cli("metrics")))[("queuectl_job_runs_total", (("outcome", "completed"),
                                                                                ("queue", "default")))] == 1
    out = tmp_path / "textfile" / "queuectl.prom"
    out.parent.mkdir()
    assert assert_ok(run_cli("metrics", "--output", str(out))) == ""
    assert (out.stat().st_mode & 0o777) == 0o644 and list(out.parent.iterdir()) == [out]  # no temporary left
    assert parse_metrics(out.read_text())[("queuectl_jobs", (("queue", "build"), ("state", "dead")))] == 0


def test_metrics_have_the_schedules_and_limits(run_cli, db):
    assert_ok(run_cli("limit", "build", "--concurrency", "2", "--rate", "30/1m"))
    assert_ok(run_cli("schedule", "add", "tick", "--every", "1s", '{"command":"true"}'))
    assert_ok(run_cli("schedule", "add", "idle", "--cron", "@yearly", '{"command":"true"}'))
    assert_ok(run_cli("schedule", "pause", "idle"))
    with open_store(db) as s:
        fired, _ = s.fire_schedules(s.now().wall + 2)
        s.fire_schedules(s.now().wall + 3)  # the first run still pending: overlap skip
    m = parse_metrics(assert_ok(run_cli("metrics")))
    assert m[("queuectl_queue_concurrency_limit", (("queue", "build"),))] == 2
    assert m[("queuectl_queue_rate_limit", (("queue", "build"), ("window_seconds", "60")))] == 30
    assert m[("queuectl_schedule_last_fire_timestamp_seconds", (("schedule", "tick"),))] > 0
    assert m[("queuectl_schedule_last_fire_timestamp_seconds", (("schedule", "idle"),))] == 0
    assert m[("queuectl_schedule_next_run_timestamp_seconds", (("schedule", "idle"),))] == 0  # paused
    assert m[("queuectl_schedule_skipped_total", (("schedule", "tick"),))] == 1
    status = json_only(run_cli("status", "--json"))
    assert [(x["name"], x["skipped"], x["last_state"]) for x in status["schedules"]] == [("idle", 0, None),
                                                                                         ("tick", 1, "pending")]
    text = assert_ok(run_cli("status"))
    assert "Schedules (2)" in text and re.search(r"^idle\s+@yearly\s+paused\s", text, re.M)


def test_metrics_output_in_a_missing_directory(run_cli, db, populated, tmp_path):
    assert_error(run_cli("metrics", "--output", str(tmp_path / "nope" / "q.prom")), 2, "does not exist")
    assert_error(run_cli("metrics", "--output", ""), 2, "--output is empty")
    assert_error(run_cli("metrics", "--output", str(tmp_path)), 2, "is a directory")


def test_status_and_metrics_still_report_when_a_stored_setting_is_broken(run_cli, db, populated):
    _store_raw_config(db, "keep-dead", '"soon"')
    assert run_cli("config", "list").exit_code == 78  # the broken value itself is reported where it is read
    status = json_only(run_cli("status", "--json"))
    assert status["retention"]["dead"] == 604800.0  # the default, in place of the broken value
    assert status["workers"][0]["state"] == "running"
    assert "queuectl_jobs{" in assert_ok(run_cli("metrics"))


def test_status_and_metrics_format_one_snapshot_that_reads_the_store_once(db, populated):
    from queuectl.api.metrics import render
    from queuectl.api.snapshot import take

    with open_store(db) as s:
        s.set_paused(["idle"], True, time.time())
        snap = take(s)
    # Formatting reads nothing: the store is closed, and the metrics are those status shows.
    text = render(snap)
    assert snap.counts["build"] == {"pending": 1, "processing": 1, "completed": 0, "failed": 0, "dead": 1,
                                    "cancelled": 0, "blocked": 0}  # every state, in order, zeros included
    assert snap.totals == {"pending": 2, "processing": 1, "completed": 1, "failed": 1, "dead": 1, "cancelled": 0, "blocked": 0}
    assert snap.runs["default"] == {"completed": 1, "failed": 1} and set(snap.paused) == {"idle"}
    assert set(snap.oldest_ready) == {"build", "default"} and all(a >= 0 for a in snap.oldest_ready.values())
    [w] = snap.workers
    assert (w.info.name, w.state, w.info.job_ids) == ("w1", "running", ("r1",)) and 0 <= w.heartbeat_age < 60
    assert snap.retention == {"completed": 86400.0, "cancelled": 86400.0, "dead": 604800.0, "history": 14 * 86400.0}
    m = parse_metrics(text)
    assert m[("queuectl_queue_paused", (("queue", "idle"),))] == 1
    assert m[("queuectl_jobs", (("queue", "idle"), ("state", "pending")))] == 0
    assert m[("queuectl_workers", (("state", "running"),))] == 1


def test_a_worker_name_taken_on_another_host_says_to_name_workers_per_host(run_cli, db):
    with open_store(db) as s:
        s.register_worker({**WORKER_INFO, "name": "1"}, s.now())  # alive, on another host
        before = snapshot(db)
    line = assert_error(run_cli("worker", "start", "--name", "1", "--burst"), 1,
                        "a worker named '1' is already running")
    assert "on testhost" in line and "names of their own" in line, line
    assert snapshot(db) == before
