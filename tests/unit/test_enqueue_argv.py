"""`queuectl enqueue [OPTIONS] -- COMMAND [ARG]...`: the arguments run as they are, with no shell reading them
(a real worker runs them here), the options give the job's fields as the JSON form's do, and every bad
form or value is one line, exit 2, nothing enqueued. On SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from support.cli import assert_error, configure
from queuectl.domain.jobspec import command_of_argv
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


#: Arguments a shell would read: spaces, quotes, $, ;, a newline, a glob, a leading dash, an empty one.
TRICKY = ["a b", '"double"', "it's", "$HOME", "$(echo no)", "x;y", "l1\nl2", "*", "-n", "--", "", "back\\slash"]


def ran(run_cli, job_id: str) -> dict:
    """Run the queue with a burst worker here; return job `job_id` as `show --json` has it, and its output."""
    assert run_cli("worker", "start", "--burst").exit_code == 0
    job = run_cli.json("show", job_id)
    return {**job, "stdout": run_cli("logs", job_id).stdout_bytes, "stderr": run_cli("logs", job_id).stderr_bytes}


def test_the_arguments_run_as_they_are_typed_with_no_shell_reading_them(run_cli):
    r = run_cli("enqueue", "--id", "tricky", "--", "printf", "%s|", *TRICKY)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "tricky\n", "")
    job = ran(run_cli, "tricky")
    assert job["command"] == command_of_argv(["printf", "%s|", *TRICKY])
    assert (job["state"], job["stdout"]) == ("completed", "".join(f"{a}|" for a in TRICKY).encode())


def test_a_command_that_starts_with_a_dash_is_a_command_not_an_option_of_the_shell(run_cli):
    configure(run_cli, ("max-retries", "0"))
    assert run_cli("enqueue", "--id", "dash", "--", "-x", "arg").exit_code == 0
    job = ran(run_cli, "dash")
    assert job["command"] == "'-x' arg"
    assert (job["state"], job["exit_code"]) == ("dead", 127) and b"-x: not found" in job["stderr"]


def test_the_options_give_the_jobs_fields_as_the_json_form_does(run_cli):
    assert run_cli("enqueue", "--", "true").exit_code == 0  # every field its default
    for job_id in ("before", "other"):
        assert run_cli("enqueue", json.dumps({"id": job_id, "command": "true"})).exit_code == 0
    r = run_cli("enqueue", "--id", "j1", "--queue", "build", "--priority", "-5", "--max-retries", "2", "--timeout",
                "10m", "--delay", "90s", "--cwd", "/tmp", "--key", "k1", "--after", "before", "--after", "other",
                "--", "make", "-C", "/srv/site")
    assert (r.exit_code, r.stdout) == (0, "j1\n")
    job = run_cli.json("show", "j1")
    assert {k: job[k] for k in ("command", "queue", "priority", "max_retries", "timeout", "cwd", "key", "after",
                                "state")} == {
        "command": "make -C /srv/site", "queue": "build", "priority": -5, "max_retries": 2, "timeout": 600.0,
        "cwd": "/tmp", "key": "k1", "after": ["before", "other"], "state": "blocked"}
    r = run_cli("enqueue", "--key", "k1", "--", "true")  # the key is held: the holder's id, as with JSON
    assert r.exit_code == 0 and r.stdout == "j1\n" and "key 'k1' is held by job j1" in r.stderr
    assert run_cli("enqueue", "--id", "later", "--run-at", "2030-01-01T00:00:00Z", "--", "true").exit_code == 0
    assert run_cli.json("show", "later")["run_at"] == "2030-01-01T00:00:00.000+00:00"
    assert len(run_cli.json("list")) == 5


@pytest.mark.parametrize("args, fragments", [
    ((), ("give a JSON job, --file FILE or -- COMMAND [ARG]...",)),
    (("--wait",), ("give a JSON job, --file FILE or -- COMMAND",)),
    (("--",), ("give the command after --",)),
    (("--id", "x", "--"), ("give the command after --",)),
    (('{"command": "true"}', "--", "true"), ("not a JSON job and -- COMMAND",)),
    (("--file", "-", "--", "true"), ("not --file and -- COMMAND",)),
    (("--queue", "build", '{"command": "true"}'), ("--queue goes with -- COMMAND",)),
    (("--queue", "build", "--after", "a", '{"command": "true"}'), ("--queue, --after go with -- COMMAND",)),
    (("--priority", "high", "--", "true"), ("--priority", "not a valid integer")),
    (("--priority", str(2**63), "--", "true"), ("priority is out of range",)),
    (("--max-retries", "-1", "--", "true"), ("max_retries must be a whole number",)),
    (("--timeout", "0", "--", "true"), ("timeout must be a number of seconds > 0",)),
    (("--timeout", "soon", "--", "true"), ("--timeout",)),
    (("--delay", "nan", "--", "true"), ("--delay",)),
    (("--delay", "5", "--run-at", "2030-01-01T00:00:00Z", "--", "true"), ("give run_at or delay, not both",)),
    (("--run-at", "2030-01-01", "--", "true"), ("run_at needs a UTC offset",)),
    (("--queue", "no such", "--", "true"), ("queue names are",)),
    (("--id", "a b", "--", "true"), ("id must be",)),
    (("--cwd", "relative", "--", "true"), ("cwd must be an absolute path",)),
    (("--key", "k\x1b", "--", "true"), ("key must be",)),
    (("--after", "nosuch", "--", "true"), ("is after 'nosuch', which is no job",)),
    (("--id", "me", "--after", "me", "--", "true"), ("cannot be after itself",)),
    (("--follow", "--file", "-", "--", "true"), ("not --file and -- COMMAND",)),
    (("--", "x" * (128 * 1024)), ("command is longer than",)),
    (("--", "bad\udcff"), ("command must be valid Unicode",)),
])
def test_a_bad_form_or_value_is_one_line_exit_2_and_nothing_is_enqueued(run_cli, args, fragments):
    code = 1 if "nosuch" in args else 2  # an `after` that names no job is an operational error, as with JSON
    assert_error(run_cli("enqueue", *args), code, *fragments)
    assert run_cli.json("list") == []


def test_only_a_first_word_that_starts_with_a_dash_is_quoted_beyond_what_shlex_join_does():
    assert command_of_argv(["-n"]) == "'-n'"
    assert command_of_argv(["-a b", "c"]) == "'-a b' c"
    assert command_of_argv(["echo", "-n"]) == "echo -n"
