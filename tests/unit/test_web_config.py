"""`queuectl web`'s configuration (queuectl.web.config): options over the site file's [web] section over the
defaults, and one clear message for every bad value; through the CLI, exit 2 for a bad option and 78 for a
bad [web] value or a bind beyond loopback without users, with nothing served and no database made."""

from __future__ import annotations

import os
import re
import socket

import pytest

from support.cli import assert_error
from queuectl.domain.errors import InvalidConfig, InvalidInput, QueuectlError
from queuectl.web import config, serve
from queuectl.web.config import WebConfig


def test_the_defaults():
    assert config.load({}, {}) == WebConfig("127.0.0.1", 8765, "", None, None, False, 3.0)
    assert config.load({"bind": None, "url_prefix": None}, {}) == WebConfig()


def test_each_option_is_parsed():
    cfg = config.load({"bind": "[::1]:9000", "url_prefix": "/q/p/", "users": "/etc/u", "user_header": "X-Remote-User",
                       "read_only": True, "interval": "5s"}, {})
    assert cfg == WebConfig("::1", 9000, "/q/p", "/etc/u", "X-Remote-User", True, 5.0)
    assert cfg.origin == "[::1]:9000" and WebConfig().origin == "127.0.0.1:8765"
    assert config.load({"url_prefix": "/"}, {}).prefix == ""
    assert config.load({"interval": "1"}, {}).interval == 1.0


def test_the_site_file_s_web_keys_and_options_over_them():
    site = {"bind": "127.0.0.1:9000", "url-prefix": "/queuectl", "users": "/etc/queuectl/web-users",
            "user-header": "X-User", "read-only": "yes", "interval": "10", "hosts": "queue.example.org"}
    from_file = config.load({}, site, "/etc/queuectl/queuectl.conf")
    assert from_file == WebConfig("127.0.0.1", 9000, "/queuectl", "/etc/queuectl/web-users", "X-User", True, 10.0,
                                  ("queue.example.org",))
    over = config.load({"bind": "127.0.0.2:9001", "url_prefix": "/other", "read_only": None, "interval": "2"}, site)
    assert (over.host, over.port, over.prefix, over.read_only, over.interval) == ("127.0.0.2", 9001, "/other", True, 2.0)
    assert config.load({}, {"read-only": "off"}).read_only is False


BAD = [
    ("bind", "nope", "a bind address is HOST:PORT (or [IPv6]:PORT), got 'nope'"),
    ("bind", "127.0.0.1:0", "a port is 1 to 65535, got 0"),
    ("bind", "127.0.0.1:65536", "a port is 1 to 65535, got 65536"),
    ("bind", ":8765", "a bind address is HOST:PORT"),
    ("url-prefix", "queuectl", "a URL prefix is a path such as /queuectl"),
    ("url-prefix", "/a b", "a URL prefix is a path such as /queuectl"),
    ("url-prefix", "/a/../b", "a URL prefix is a path such as /queuectl"),
    ("url-prefix", "/a?b", "a URL prefix is a path such as /queuectl"),
    ("user-header", "X Remote", "not an HTTP header name: 'X Remote'"),
    ("user-header", "X:User", "not an HTTP header name"),
    ("read-only", "maybe", "yes or no, got 'maybe'"),
    ("interval", "0.5", "an interval is 1 to 60 seconds, got '0.5'"),
    ("interval", "61", "an interval is 1 to 60 seconds, got '61'"),
    ("interval", "2m", "an interval is 1 to 60 seconds, got '2m'"),
    ("hosts", "*", "a host name to answer is a DNS name (queue.example.org; .example.org"
                   " for it and its subdomains, two labels at least) or an IP address, without scheme, port or '*',"
                   " got '*'"),
]


@pytest.mark.parametrize("key, value, message", BAD)
def test_a_bad_option_is_invalid_input_and_a_bad_file_value_invalid_config(key, value, message):
    [option] = [option for option in config.OPTIONS if option.key == key]
    with pytest.raises(InvalidInput) as given:
        config.load({option.param: (value,) if key == "hosts" else value}, {})
    assert not isinstance(given.value, InvalidConfig) and message in str(given.value)
    # The file's value is refused even where an option overrides it: the service gives no options.
    good = {"bind": "127.0.0.1:9000", "url-prefix": "/q", "user-header": "X-User", "read-only": "yes",
            "interval": "5", "hosts": ("a.example",)}[key]
    for options in ({}, {option.param: good}):
        with pytest.raises(InvalidConfig) as in_file:
            config.load(options, {key: value}, "/etc/q.conf")
        assert str(in_file.value).startswith(f"/etc/q.conf: [web] {key}: ") and message in str(in_file.value)


def test_an_interval_that_is_no_duration_says_so():
    for value in ("abc", "nan", "inf", "-1"):
        with pytest.raises(InvalidInput, match="interval"):
            config.load({"interval": value}, {})


def test_an_unknown_web_key_is_named_with_the_keys():
    with pytest.raises(InvalidConfig) as e:
        config.load({}, {"port": "80", "bind": "127.0.0.1:80"}, "/etc/q.conf")
    assert str(e.value) == ("/etc/q.conf: unknown [web] port; the keys are bind, url-prefix, users, user-header,"
                            " read-only, interval, hosts")


def test_exposure_is_judged_on_addresses_never_on_names():
    for address in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"):
        assert config.is_loopback(address), address
        config.check_exposure(address, None)
    # A name (even "localhost") is judged by what it resolves to (test_where_to_listen_...), never by itself.
    for host in ("0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "localhost", "example.com", "127.0.0.1.example.com"):
        assert not config.is_loopback(host), host
        with pytest.raises(InvalidConfig, match=f"refusing to listen on {host} without users"):
            config.check_exposure(host, None)
        config.check_exposure(host, "/etc/queuectl/web-users")
    with pytest.raises(InvalidConfig, match=r"refusing to listen on db1 \(10\.0\.0\.1\) without users"):
        config.check_exposure("10.0.0.1", None, "db1")


def test_where_to_listen_resolves_the_bind_once_and_checks_every_address():
    """The numeric address checked is the one gunicorn binds (no name resolved again after the check): the
    resolutions of this host's resolver; a name whose resolution is beyond loopback:
    tests/processes/test_web_bind.py."""
    from support.pgserver import free_port

    port = free_port()
    for host, bound in (("localhost", "127.0.0.1"), ("127.0.0.1", "127.0.0.1")):
        assert serve.where_to_listen(WebConfig(host, port), environ={}) == serve.Listen([(bound, port)], False)
    for host in ("0.0.0.0", "::"):
        with pytest.raises(InvalidConfig, match=f"^refusing to listen on {re.escape(host)} without users"):
            serve.where_to_listen(WebConfig(host, port), environ={})
        assert serve.where_to_listen(WebConfig(host, port, users="/etc/queuectl/web-users"), environ={}).addresses \
            == [(host, port)]
    with socket.socket() as taken:  # in use: one line, not gunicorn's retries
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with pytest.raises(QueuectlError, match=f"^cannot listen on 127.0.0.1:{busy}: Address already in use"):
            serve.where_to_listen(WebConfig("127.0.0.1", busy), environ={})


def test_ipv6_loopback_is_served_on_it():
    with socket.socket(socket.AF_INET6) as probe:
        try:
            probe.bind(("::1", 0))
        except OSError as e:
            pytest.skip(f"no IPv6 loopback here: {e.strerror}")
        port = probe.getsockname()[1]
    assert serve.where_to_listen(WebConfig("::1", port), environ={}) == serve.Listen([("::1", port)], False)


@pytest.fixture
def site_file(tmp_path, monkeypatch):
    """Write the site configuration file (QUEUECTL_CONFIG names it) and return its path."""
    path = tmp_path / "queuectl.conf"
    monkeypatch.setenv("QUEUECTL_CONFIG", str(path))

    def write(text: str) -> str:
        path.write_text(text)
        return str(path)
    return write


def test_the_cli_refuses_beyond_loopback_without_users_and_makes_nothing(run_cli, db):
    line = assert_error(run_cli("web", "--bind", "0.0.0.0:8765"), 78, "refusing to listen on 0.0.0.0 without users")
    assert "--users FILE" in line
    assert not os.path.exists(db)


def test_the_cli_s_bad_options_exit_2(run_cli, db):
    assert_error(run_cli("web", "--interval", "0"), 2, "an interval is 1 to 60 seconds")
    assert_error(run_cli("web", "--bind", "localhost"), 2, "a bind address is HOST:PORT")
    assert_error(run_cli("web", "--url-prefix", "x"), 2, "a URL prefix is a path")
    assert_error(run_cli("web", "--user-header", "X-User"), 78, "--user-header needs --users")
    assert not os.path.exists(db)


def test_the_cli_s_bad_site_values_exit_78_naming_the_file(run_cli, db, site_file):
    path = site_file("[web]\ninterval = 0.1\n")
    assert_error(run_cli("web"), 78, f"{path}: [web] interval: an interval is 1 to 60 seconds")
    site_file("[web]\nlisten = 0.0.0.0:80\n")
    assert_error(run_cli("web"), 78, "unknown [web] listen")
    site_file("[web]\nbind = 0.0.0.0:8765\n")
    assert_error(run_cli("web"), 78, "refusing to listen on 0.0.0.0 without users")
    assert not os.path.exists(db)


def test_the_cli_names_a_users_file_it_cannot_read(run_cli, db, tmp_path):
    missing = tmp_path / "nobody"
    assert_error(run_cli("web", "--users", str(missing)), 78, f"cannot read the users file {missing}")
    assert not os.path.exists(db)


def test_each_option_fills_its_fields_and_is_documented():
    from pathlib import Path

    filled = [field for option in config.OPTIONS for field in option.fields]
    assert sorted(filled) == sorted(config.WebConfig._fields)  # each field once, by one option
    assert config.load({}, {}) == config.WebConfig()  # the defaults are the record's
    page = Path(__file__).parents[2] / "docs" / "web.md"
    if not page.exists():
        pytest.skip("docs/ is not beside the tests (the package build copies the tests alone)")
    table = page.read_text()
    for option in config.OPTIONS:
        assert f"| `{option.key}` (`--{option.option or option.key}" in table, option.key
