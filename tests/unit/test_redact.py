"""No password in any message: queuectl.domain.dburi's candidates and masks, every shape through the CLI, and
Hypothesis-generated URIs with passwords in every place and shape.

A password reaches a PostgreSQL URI in its user part or a `password=` parameter, plain or
percent-encoded; the URI may be malformed around it (an unbalanced '[', a bad port, a bad percent
escape, a stray '@' or '/', a misspelled key), and libpq's messages quote the URI or parts of it.
Whatever the shape, and wherever the URI came from (--db, QUEUECTL_DB, the configuration file),
each command gives one line on stderr, its documented exit code, and neither stdout nor stderr
holds the password as written, decoded, or any text with its marker. Passwords start with MARK,
which nothing else in a URI or a message holds.
"""

from __future__ import annotations

import os
import string
import subprocess
from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.cli import Cli, QUEUECTL, assert_error
from support.suite import import_or_skip
from support.pgserver import free_port
from queuectl.domain.dburi import redact, secrets, uri_error

#: Every test password starts with this: no other text of a URI or of a message holds it.
MARK = "QxPw9"
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Commands that open the database, each as a test runs it (`worker start --burst` too: it fails first).
COMMANDS = [("status",), ("enqueue", '{"command":"true"}'), ("list",), ("config", "get", "max-retries"),
            ("worker", "start", "--burst"), ("metrics",)]


def assert_hidden(output: str, password: str, written: str = "") -> None:
    """Neither the password (decoded), nor as written, nor any text with MARK appears in `output`."""
    for text in filter(None, (password, written, unquote(written, errors="replace"), MARK)):
        assert text not in output, (text, output)


# -- queuectl.domain.dburi: no driver, no server ------------------------------------------------------------

SHAPES = [  # (URI, its password as libpq or the user meant it)
    ("postgresql://alice:QxPw9plain@h/db", "QxPw9plain"),
    ("postgresql://alice:p%40ssw0rd@[127.0.0.1/db", "p@ssw0rd"),
    ("postgresql://alice@[127.0.0.1/db?password=QxPw9query", "QxPw9query"),
    ("postgresql://alice@h/db?sslmode=disable&password=QxPw9%20mid&connect_timeout=2", "QxPw9 mid"),
    ("postgresql://alice@h/db?pass%77ord=QxPw9key", "QxPw9key"),
    ("postgresql://alice@h/db?sslpassword=QxPw9ssl", "QxPw9ssl"),
    ("postgresql://alice@h/db?PASSWORD=QxPw9upper", "QxPw9upper"),
    ("postgresql://alice@h/db?QxPw9bare", "QxPw9bare"),
    ("postgresql://alice@h/db?sslmode=require?password=QxPw9nested", "QxPw9nested"),
    ("postgresql://alice:QxPw9@stray@h/db", "QxPw9@stray"),
    ("postgresql://alice:QxPw9/slash@h/db", "QxPw9/slash"),
    ("postgres:/alice:QxPw9near@h/db", "QxPw9near"),
    ("POSTGRESQL://alice:QxPw9caps@h/db", "QxPw9caps"),
    ("host=h password=QxPw9kw dbname=db", "QxPw9kw"),
]


@pytest.mark.parametrize("uri, password", SHAPES)
def test_every_shape_of_password_is_a_candidate_and_masked(uri, password):
    found = secrets(uri)
    assert password in found
    message = f"x {password} {uri} {password!r} {unquote(uri)} y"
    assert MARK not in redact(message, uri) and "p@ssw0rd" not in redact(message, uri)
    assert redact(message, uri).startswith("x ***") and redact(message, uri).endswith(" y")


def test_escaped_forms_are_masked_too():
    uri = "postgresql://alice:QxPw9%27q%5C%22%0A%C3%A9@h/db"  # ' \ " newline é
    password = "QxPw9'q\\\"\né"
    for shown in (password, repr(password), ascii(password), password.replace("\\", "\\\\").replace("'", "\\'"),
                  '"QxPw9\'q\\\\\\"\\n\\u00e9"'):  # the last as JSON escapes it
        assert MARK not in redact(f"password {shown} here", uri), shown


def test_a_password_with_a_raw_slash_is_masked_where_libpq_puts_it():
    uri = "postgresql://alice:QxPw9/slash@127.0.0.1:5/db"  # libpq: host alice, port QxPw9, dbname slash@...
    assert redact(f"database {uri}: 'QxPw9' is not a port", uri) == "database postgresql://alice:***@127.0.0.1:5/db:" \
        " '***' is not a port"


def test_a_uri_without_password_loses_nothing():
    for uri in ("postgresql://alice@db.example:5432/q?sslmode=require&application_name=x",
                "postgresql:///queuectl?host=/run/postgresql", "postgresql://?service=queuectl",
                "postgresql://h:5432,h2:5433/q?user=a@corp&target_session_attrs=read-write"):
        text = f"cannot connect to database {uri}: port 5432 failed"
        assert redact(text, uri) == text, uri


@pytest.mark.parametrize("message, uri, expected", [
    ('end of string reached when looking for matching "]" in IPv6 host address in URI: "postgresql://a:QxPw9@[h"',
     "postgresql://a:QxPw9@[h", 'end of string reached when looking for matching "]" in IPv6 host address in URI'),
    ('unexpected character "x" at position 19 in URI (expected ":" or "/"): "postgresql://[::1]x/QxPw9"',
     "postgresql://[::1]x/QxPw9", 'unexpected character "x" at position 19 in URI (expected ":" or "/")'),
    ('invalid percent-encoded token: "QxPw9%zz"', "postgresql://h/db?password=QxPw9%zz",
     "invalid percent-encoded token"),
    ('missing key/value separator "=" in URI query parameter: "QxPw9bare"', "postgresql://h/db?QxPw9bare",
     'missing key/value separator "=" in URI query parameter'),
    ('invalid URI query parameter: "sslmod"', "postgresql://h/db?sslmod=x&password=QxPw9",
     'invalid URI query parameter: "sslmod"'),
    ('connection is bad: invalid integer value "9x" for connection option "port"', "postgresql://h:9x/db",
     'connection is bad: invalid integer value for connection option "port"'),
    # A '"' in the URI: quotes cannot be paired, so the message ends before the first quoted text.
    ('end of string reached when looking for matching "]" in IPv6 host address in URI: "postgresql://a@[h/d?x=ab"QxPw9"',
     'postgresql://a@[h/d?x=ab"QxPw9', 'end of string reached when looking for matching "]" in IPv6 host address in URI'),
    ('invalid percent-encoded token: "ab"QxPw9%zz"', 'postgresql://h/ab"QxPw9%zz', "invalid percent-encoded token"),
    ('"postgresql://h/QxPw9', "postgresql://h/QxPw9", "it cannot be parsed"),
])
def test_uri_error_quotes_no_part_of_the_uri(message, uri, expected):
    assert uri_error(message, uri) == expected


#: What a password is made of: letters and digits, text beyond ASCII, and the characters that a URI
#: gives a meaning to (raw in a URI, they make it malformed around the password).
plain_chars = st.sampled_from([*string.ascii_letters, *string.digits, "-", "_", ".", "~", "é", "ß", "日", "😀"])
special_chars = st.sampled_from([*"!$'()*+,;:=?#[]&/@% \"\\", "\u2028", "\udcff"])
passwords = st.one_of(st.text(plain_chars, min_size=3, max_size=10),
                      st.text(st.one_of(plain_chars, special_chars), min_size=3, max_size=10)).map(MARK.__add__)


@st.composite
def written(draw, password: str) -> str:
    """`password` as a URI may hold it: plain, percent-encoded (all, some or every byte), or with a bad escape."""
    how = draw(st.sampled_from(["plain", "plain", "encoded", "encoded", "every byte", "some", "bad escape"]))
    if how == "plain":
        return password
    data = password.encode("utf-8", "surrogateescape")
    if how == "every byte":
        return "".join(f"%{b:02X}" for b in data)
    if how == "some":
        return "".join(quote(ch, safe="", errors="surrogateescape") if draw(st.booleans()) else ch for ch in password)
    text = quote(data, safe="")
    if how == "bad escape":
        at = draw(st.integers(len(MARK), len(text)))
        text = text[:at] + draw(st.sampled_from(["%", "%4", "%zz", "%ff", "%00", "%C3"])) + text[at:]
    return text


def mostly(usual, *others):
    """`usual` in about 3 of 4 draws, else one of `others` (malformations are the exception)."""
    return st.one_of(st.just(usual), st.just(usual), st.just(usual), st.sampled_from(others))


@st.composite
def password_uris(draw, port: st.SearchStrategy = st.just(1)) -> tuple[str, str, str]:
    """(URI, password, password as written): a password in the user part, a query parameter or both, in every
    shape `written` makes, in a URI that may be malformed around it."""
    password = draw(passwords)
    shown = draw(written(password))
    scheme = draw(mostly("postgresql://", "postgres://", "POSTGRESQL://", "postgresql:/", "postgres:", "postgresq://"))
    user = draw(st.sampled_from(["alice", "qpass", "qpass", "al@ice", "a%zz"]))
    host = draw(mostly("127.0.0.1", "[127.0.0.1", "127.0.0.1]", "[::1", "[]", "127.0.0.1@"))
    port_number = draw(port)
    where = draw(mostly(f":{port_number}", ":99999", ":9x", ":", ":-1", f":{port_number}:"))
    others = draw(st.lists(mostly("sslmode=disable", "connect_timeout=3", "application_name=x", "bad key=1",
                                  "sslmode=bogus", "port=9x", "x"), max_size=3))
    place = draw(st.sampled_from(["user", "query", "both"]))
    auth = f"{user}:{shown}" if place != "query" else user
    if place != "user":
        key = draw(mostly("password=", "sslpassword=", "pass%77ord=", "PASSWORD=", "passwd=", "pass word=", "=",
                          "password =", "password==", ""))
        others.insert(draw(st.integers(0, len(others))), key + shown)
    query = ("?" + "&".join(others)) if others else ""
    return f"{scheme}{auth}@{host}{where}/qredact_none{query}", password, shown


@settings(max_examples=300, **SETTINGS)
@given(case=password_uris())
def test_a_redacted_uri_and_its_parse_error_hold_no_password(case):
    uri, password, shown = case
    assert_hidden(redact(uri, uri), password, shown)
    assert_hidden(uri_error(f'invalid URI: "{uri}"', uri), password, shown)


@settings(max_examples=2000, **SETTINGS)
@given(case=password_uris(st.sampled_from([5432, 60787])))
def test_a_uri_rebuilt_from_libpqs_parse_holds_no_password(case):
    """What a connection error shows: the URI as libpq read it (queuectl.store.postgres.store._display). A
    password with an encoded ',' (%2C) that libpq took for a list of hosts and ports came back in pieces
    with a ':' put between them, which no candidate covered (CI found it against a real server)."""
    conninfo = import_or_skip("psycopg.conninfo")
    from queuectl.store.postgres.store import _display

    uri, password, shown = case
    try:
        params = conninfo.conninfo_to_dict(uri)
    except Exception:  # refused before any connection: uri_error's case
        return
    assert_hidden(redact(_display(params), uri), password, shown)


def test_a_password_split_at_an_encoded_comma_is_hidden_in_each_piece():
    uri = "postgresql://al@ice:QxPw9n%23YQk%2C~23%22@127.0.0.1:60787/qredact_none"
    assert "QxPw9" not in redact('postgresql://al@ice:QxPw9n#YQk,:~23"@127.0.0.1:60787/qredact_none', uri)


# -- the CLI: explicit shapes -----------------------------------------------------------------------------


@pytest.fixture
def dead_port() -> int:
    """A port on 127.0.0.1 where nothing listens: connecting fails at once."""
    return free_port()


def run_everywhere(uri: str, tmp_path, source: str = "option"):
    """Each of COMMANDS with `uri` given by --db, QUEUECTL_DB or the configuration file; yield (args, result)."""
    env = {}
    if source == "environment":
        env["QUEUECTL_DB"] = uri
    elif source == "config":
        path = tmp_path / "queuectl.conf"
        path.write_text(f"[queuectl]\ndb = {uri}\n", encoding="utf-8", errors="surrogateescape")
        env["QUEUECTL_CONFIG"] = str(path)
    run = Cli(uri if source == "option" else None)
    for args in COMMANDS:
        yield args, run(*args, env=env)


CLI_SHAPES = [  # (URI with {port}, its password as written, exit code, what the one line says)
    ("postgresql://alice@[127.0.0.1/db?password=QxPw9plain", "QxPw9plain", 2, "IPv6 host address"),
    ("postgresql://alice:p%40ssw0rd@[127.0.0.1/db", "p%40ssw0rd", 2, "IPv6 host address"),
    ("postgresql://alice@127.0.0.1:{port}/db?password=QxPw9%zz", "QxPw9%zz", 2, "invalid percent-encoded token"),
    ("postgresql://alice@127.0.0.1:{port}/db?sslmode=disable&QxPw9bare", "QxPw9bare", 2, "key/value separator"),
    ('postgresql://alice@[127.0.0.1/db?x="&password=QxPw9quote', "QxPw9quote", 2, "IPv6 host address"),
    ("postgresql://alice:QxPw9\udcffx@127.0.0.1:{port}/db", "QxPw9\udcffx", 2, "not UTF-8 text"),
    ("postgresql://alice:QxPw9%FFx@127.0.0.1:{port}/db", "QxPw9%FFx", 2, "percent-encoded value is not UTF-8"),
    ("postgresql://alice@127.0.0.1:9x/db?password=QxPw9port", "QxPw9port", 2, "invalid integer value"),
    # libpq reads "QxPw9" as the port: psycopg 3.1 refuses it (exit 2), 3.2 and later first look up the
    # host "alice" and fail to connect (exit 1), the URI shown with its host, port and dbname in it masked.
    ("postgresql://alice:QxPw9/slash@127.0.0.1:{port}/db", "QxPw9/slash", (1, 2), ""),
    ("postgresql://alice:QxPw9%25pct@127.0.0.1:{port}/db", "QxPw9%25pct", 1, "postgresql://alice@127.0.0.1:"),
    ("postgresql://alice@127.0.0.1:{port}/db?sslmode=disable&password=QxPw9mid&connect_timeout=3", "QxPw9mid", 1,
     "cannot connect to database postgresql://alice@127.0.0.1:"),
    ("postgresql://alice:QxPw9%0Anl@127.0.0.1:{port}/d%0Ab%E2%80%A8c", "QxPw9%0Anl", 1, "/d b c: "),  # line breaks
    ("postgres:/alice:QxPw9near@127.0.0.1/db", "QxPw9near", 2, "is not a URI queuectl takes"),
    ("host=127.0.0.1 password=QxPw9kw", "QxPw9kw", 2, "libpq keyword string"),
]


@pytest.mark.parametrize("template, shown, code, fragment", CLI_SHAPES)
def test_every_command_hides_the_password_of_every_shape(template, shown, code, fragment, dead_port, tmp_path):
    import_or_skip("psycopg")
    for args, r in run_everywhere(template.format(port=dead_port), tmp_path):
        assert r.exit_code in (code if isinstance(code, tuple) else (code,)), (args, r.exit_code, r.stderr)
        assert_hidden(assert_error(r, r.exit_code, fragment), unquote(shown, errors="replace"), shown)


@pytest.mark.parametrize("source", ["environment", "config"])
def test_a_uri_from_the_environment_or_the_file_hides_its_password_too(source, tmp_path):
    import_or_skip("psycopg")
    for uri in ("postgresql://alice@[127.0.0.1/db?password=QxPw9plain", "postgres:/alice:QxPw9near@h/db"):
        for args, r in run_everywhere(uri, tmp_path, source):
            assert_hidden(assert_error(r, 78), "QxPw9", uri)


def test_the_servers_refusal_of_a_wrong_password_hides_it(pg_server, tmp_path):
    for uri in (pg_server.uri("postgres", "qpass", "QxPw9wrong"),
                f"postgresql://qpass@127.0.0.1:{pg_server.port}/postgres?password=QxPw9%2Fwrong"):
        for args, r in run_everywhere(uri, tmp_path):
            line = assert_error(r, 1, 'password authentication failed for user "qpass"')
            assert_hidden(line, "QxPw9")


def test_a_configuration_file_line_without_a_section_is_not_repeated(tmp_path):
    path = tmp_path / "queuectl.conf"
    path.write_text("db = postgresql://alice:QxPw9file@h/db\n[queuectl]\nQxPw9 alone on a line\n")
    line = assert_error(Cli(None)("status", env={"QUEUECTL_CONFIG": str(path)}), 78, "line 1")
    assert_hidden(line, "QxPw9file", "QxPw9")
    path.write_text("[queuectl]\ndb = postgresql://alice@h/db\nQxPw9 alone on a line\n")
    assert_hidden(assert_error(Cli(None)("status", env={"QUEUECTL_CONFIG": str(path)}), 78, "line 3"), "QxPw9")


def test_a_real_process_hides_a_query_password_and_a_byte_that_is_not_utf8(tmp_path):
    import_or_skip("psycopg")
    for uri, code in ((b"postgresql://alice@[127.0.0.1/db?password=QxPw9plain", 2),
                      (b"postgresql://alice:QxPw9\xff@127.0.0.1:1/db", 2)):
        r = subprocess.run([*QUEUECTL, b"--db", uri, "status"], capture_output=True, timeout=60,
                           env={**os.environ, "QUEUECTL_CONFIG": ""})
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        assert (r.returncode, out, err.count("\n")) == (code, "", 1), (r.returncode, out, err)
        assert err.startswith("queuectl: error: not a valid PostgreSQL URI") and MARK not in err, err


# -- the CLI: generated URIs, against nothing and against the real server --------------------------------


@pytest.fixture
def server_port(pg_server) -> int:
    if not pg_server.running():
        pg_server.start()
    return pg_server.port


@settings(max_examples=200, **SETTINGS)
@given(data=st.data())
def test_no_command_shows_a_generated_password(data, server_port, dead_port, tmp_path):
    uri, password, shown = data.draw(password_uris(st.sampled_from([dead_port, server_port])), label="case")
    source = data.draw(st.sampled_from(["option", "option", "environment", "config"]), label="source")
    codes = {"option": {1, 2}, "environment": {1, 78}, "config": {1, 78}}[source]
    for args, r in run_everywhere(uri, tmp_path, source):
        assert r.exit_code in codes, (args, r.exit_code, r.stdout, r.stderr)
        assert_hidden(r.stdout + assert_error(r, r.exit_code), password, shown)
