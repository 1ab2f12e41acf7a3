import re

import pytest

from support.cli import json_error_position

from queuectl.domain.errors import InvalidInput
from queuectl.domain.jobspec import MAX_COMMAND_BYTES, parse_job

NOW = 1_000_000.0


def test_defaults():
    job = parse_job('{"command": "echo hi"}', NOW)
    assert job.command == "echo hi"
    assert len(job.id) == 16 and job.queue == "default" and job.priority == 0
    assert job.max_retries is None and job.timeout is None and job.cwd is None
    assert job.run_at == NOW


def test_generated_ids_differ():
    assert parse_job('{"command":"x"}', NOW).id != parse_job('{"command":"x"}', NOW).id


def test_all_fields():
    job = parse_job(
        '{"id":"j-1","command":"make","queue":"build","priority":-3,"max_retries":0,'
        '"run_at":"2026-12-01T10:00:00+01:00","timeout":2.5,"cwd":"/srv"}', NOW)
    assert (job.id, job.queue, job.priority, job.max_retries, job.timeout, job.cwd) == (
        "j-1", "build", -3, 0, 2.5, "/srv")
    assert job.run_at == 1796115600.0  # 09:00 UTC


def test_run_at_z_and_delay():
    assert parse_job('{"command":"x","run_at":"1970-01-01T00:00:10Z"}', NOW).run_at == 10.0
    assert parse_job('{"command":"x","delay":2.5}', NOW).run_at == NOW + 2.5


def test_command_at_the_size_limit_is_accepted():
    cmd = "x" * MAX_COMMAND_BYTES
    assert parse_job('{"command":"%s"}' % cmd, NOW).command == cmd


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('{"command": ', "malformed JSON"),
        ('[1]', "must be a JSON object"),
        ('{}', "missing field: command"),
        ('{"command": 5}', "command must be a string"),
        ('{"command": "  "}', "must not be empty"),
        ('{"command": "a\\u0000b"}', "NUL"),
        ('{"command": "x", "colour": 1}', "unknown field"),
        ('{"command": "x", "id": ""}', "id must be"),
        ('{"command": "x", "id": 7}', "id must be"),
        ('{"command": "x", "id": "a b"}', "id must be"),
        ('{"command": "x", "queue": "a/b"}', "queue names are"),
        ('{"command": "x", "priority": 1.5}', "priority"),
        ('{"command": "x", "priority": true}', "priority"),
        ('{"command": "x", "max_retries": -1}', "max_retries"),
        ('{"command": "x", "max_retries": 1.5}', "max_retries"),
        ('{"command": "x", "max_retries": "3"}', "max_retries"),
        ('{"command": "x", "max_retries": false}', "max_retries"),
        ('{"command": "x", "run_at": "tomorrow"}', "not an ISO-8601"),
        ('{"command": "x", "run_at": "2026-12-01T10:00:00"}', "UTC offset"),
        ('{"command": "x", "run_at": 5}', "run_at must be"),
        ('{"command": "x", "run_at": "2026-12-01T10:00:00Z", "delay": 1}', "not both"),
        ('{"command": "x", "delay": -1}', "delay"),
        ('{"command": "x", "delay": "5"}', "delay"),
        ('{"command": "x", "timeout": 0}', "timeout"),
        ('{"command": "x", "timeout": -2}', "timeout"),
        ('{"command": "x", "cwd": "tmp"}', "absolute"),
    ],
)
def test_bad_jobs_are_refused_with_a_reason(text, fragment):
    with pytest.raises(InvalidInput, match=fragment.replace("(", r"\(")):
        parse_job(text, NOW)


def test_malformed_json_reports_its_position():
    for text in ('{"command": }', '{"id": "a",\n"command": }', '{"command": "x",}'):
        with pytest.raises(InvalidInput, match=re.escape(f"at {json_error_position(text)}") + "$"):
            parse_job(text, NOW)
    assert json_error_position('{"id": "a",\n"command": }').startswith("line 2 column ")


def test_null_means_absent_and_duplicate_fields_are_refused():
    job = parse_job('{"command":"x","id":null,"priority":null,"queue":null,"max_retries":null,"timeout":null}', NOW)
    assert (job.priority, job.queue, job.max_retries, job.timeout, len(job.id)) == (0, "default", None, None, 16)
    with pytest.raises(InvalidInput, match="'id' is given twice"):
        parse_job('{"command":"x","id":"a","id":"b"}', NOW)


def test_oversized_command_is_refused():
    with pytest.raises(InvalidInput, match="longer than"):
        parse_job('{"command":"%s"}' % ("é" * (MAX_COMMAND_BYTES // 2 + 1)), NOW)
