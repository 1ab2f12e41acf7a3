"""The host names the dashboard answers to (queuectl.web.hosts): the rule on names and Host headers, and the
application's check on every request (Flask's test client on a real SQLite file): a request naming a host it
was not told about gets 421 and nothing of the queue, pages, assets, output and actions alike, with users or
without, before any sign-in; a trusted proxy's X-Forwarded-Host is checked too, and an untrusted one is
neither checked nor believed; each refused name is logged once."""

from __future__ import annotations

import json
import socket

import pytest
from hypothesis import given, strategies as st
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from support.cli import assert_error
from support.engines import snapshot
from queuectl.domain.errors import InvalidConfig, InvalidInput
from queuectl.web import config, hosts
from queuectl.web.hosts import Allowed, canonical, host_of, parse_name, parse_names
from support.webapp import Dashboard, token_in
from support.webserver import SECRET

@pytest.fixture
def said():
    return []


@pytest.fixture
def open_dash(db, tmp_path, said):
    """Start a Dashboard (its arguments) that logs to `said`; each is closed at the end."""
    started = []

    def start(**kw) -> Dashboard:
        started.append(Dashboard(db, tmp_path, say=said.append, **kw))
        return started[-1]

    yield start
    for d in started:
        d.close()


# The rule on names.

@pytest.mark.parametrize("raw, name", [
    ("localhost", "localhost"), ("LocalHost.", "localhost"), ("Queue.Example.ORG", "queue.example.org"),
    ("127.0.0.1", "127.0.0.1"), ("::1", "[::1]"), ("[::1]", "[::1]"), ("[0:0:0:0:0:0:0:1]", "[::1]"),
    ("2001:DB8::1", "[2001:db8::1]"), ("my_host", "my_host"), ("a-b.c-d", "a-b.c-d"), ("x" * 63 + ".example", "x" * 63 + ".example"),
])
def test_a_host_s_canonical_form(raw, name):
    assert canonical(raw) == name


@pytest.mark.parametrize("raw", ["", " ", "a b", "a..b", "-a.b", "a-.b", "127.1", "example.123", "[::1", "[evil]",
                                 "bücher.example", "x" * 64 + ".example", ("a" * 60 + ".") * 5, "a/b", "a@b", "*"])
def test_what_is_no_host(raw):
    assert canonical(raw) is None


@pytest.mark.parametrize("header, name", [
    ("localhost", "localhost"), ("localhost:8765", "localhost"), ("LOCALHOST:9000", "localhost"),
    ("[::1]:8765", "[::1]"), ("[::1]", "[::1]"), ("127.0.0.1:", "127.0.0.1"), ("evil.example:8765", "evil.example"),
    ("", None), (None, None), ("::1", None), ("localhost:87650", None), ("localhost:http", None),
    ("a:1:2", None), ("[::1]x", None), ("user@localhost", None), ("localhost:8765/path", None),
])
def test_the_host_of_a_host_header(header, name):
    assert host_of(header) == name


@pytest.mark.parametrize("raw, name", [("queue.example.org", "queue.example.org"), (".Example.org", ".example.org"),
                                       ("10.0.0.5", "10.0.0.5"), ("::1", "[::1]"), ("bücher.example",
                                                                                    "xn--bcher-kva.example")])
def test_a_configured_name(raw, name):
    assert parse_name(raw) == name


@pytest.mark.parametrize("raw", ["", "*", "*.example.org", "queue.example.org:443", "http://queue.example.org",
                                 "queue.example.org/q", ".10.0.0.5", ".[::1]", "..example.org", "a b", "127.1",
                                 ".com", ".lan", "a.example # a comment"])
def test_a_bad_configured_name_says_what_a_name_is(raw):
    with pytest.raises(InvalidInput, match=r"^a host name to answer is a DNS name"
                                           r" \(queue\.example\.org; \.example\.org for it and its subdomains, two"
                                           r" labels at least\) or an IP address, without scheme, port or '\*', got "):
        parse_names([raw] if "#" not in raw else raw)


def test_names_from_options_or_from_one_line_of_the_site_file():
    assert parse_names(("a.example", "A.example", "10.0.0.5")) == ("a.example", "10.0.0.5")
    assert parse_names("a.example, .b.example\t10.0.0.5 ,") == ("a.example", ".b.example", "10.0.0.5")
    assert parse_names("") == parse_names("  ") == ()
    with pytest.raises(InvalidInput):
        parse_names(("a.example", ""))  # an option given empty is a mistake, not nothing


def test_the_names_served_are_loopback_s_the_bound_address_and_the_configured_ones():
    allowed = Allowed.served(("queue.example.org", ".corp.example"), ["10.0.0.5", "db1", "0.0.0.0", "::"])
    for name in ("localhost", "127.0.0.1", "[::1]", "10.0.0.5", "db1", "queue.example.org", "corp.example",
                 "a.corp.example", "b.a.corp.example"):
        assert name in allowed, name
    for name in ("0.0.0.0", "[::]", "127.0.0.2", "example.org", "evilcorp.example", "corp.example.evil",
                 "a.queue.example.org", "localhost.evil", None):
        assert name not in allowed, name
    assert allowed.listed() == ("localhost, 127.0.0.1, [::1], 10.0.0.5, db1, queue.example.org, .corp.example,"
                                " and the address of this host a request arrives at")  # bound to 0.0.0.0 too
    assert Allowed.served().listed() == "localhost, 127.0.0.1, [::1]"
    assert Allowed.served((), ["10.0.0.5"]).listed() == "localhost, 127.0.0.1, [::1], 10.0.0.5"


@given(st.text(max_size=40))
def test_any_host_header_is_judged_without_an_error(header):
    name = host_of(header)
    assert name is None or name == canonical(name)  # canonical, and only what canonical accepts


@given(st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True).filter(
    lambda n: not n.endswith("-") and "-." not in n), st.integers(1, 65535))
def test_a_name_answered_is_answered_on_every_port_and_in_every_case(name, port):
    allowed = Allowed.served(parse_names([name]))
    assert host_of(f"{name.upper()}:{port}") in allowed and host_of(name) in allowed
    assert host_of(f"{name}.evil.example:{port}") not in allowed and host_of(f"x{name}:{port}") not in allowed


# The configuration: --allow-host and [web] hosts.

def test_allow_host_is_repeatable_and_over_the_site_file_s_hosts():
    assert config.load({"allow_host": ("A.example", ".b.example")}, {}).hosts == ("a.example", ".b.example")
    assert config.load({"allow_host": ()}, {"hosts": "c.example d.example"}).hosts == ("c.example", "d.example")
    assert config.load({"allow_host": ("a.example",)}, {"hosts": "c.example"}).hosts == ("a.example",)
    assert config.load({}, {}).hosts == ()
    with pytest.raises(InvalidConfig, match=r"^/etc/q.conf: \[web\] hosts: a host name to answer is .* got 'x:80'$"):
        config.load({}, {"hosts": "a.example x:80"}, "/etc/q.conf")


def test_the_cli_refuses_a_bad_allow_host_with_exit_2_and_a_bad_hosts_with_78(run_cli, db, tmp_path, monkeypatch):
    import os

    assert_error(run_cli("web", "--allow-host", "*"), 2, "a host name to answer is a DNS name", "got '*'")
    assert_error(run_cli("web", "--allow-host", "queue.example.org:443"), 2, "without scheme, port")
    site = tmp_path / "queuectl.conf"
    site.write_text("[web]\nhosts = queue.example.org, http://queue.example.org\n")
    monkeypatch.setenv("QUEUECTL_CONFIG", str(site))
    assert_error(run_cli("web"), 78, f"{site}: [web] hosts: ", "got 'http://queue.example.org'")
    assert not os.path.exists(db)  # nothing made


# The check on every request.

def refused_host(response, name: str | None = "evil.example") -> None:
    """A 421 with one line saying why (naming `name`), the security headers, and nothing of the queue."""
    assert response.status_code == 421, (response.status_code, response.data[:300])
    body = response.get_data(as_text=True)
    for leak in (SECRET, "d1", "deploy", "default", "<table", "<form", "csrf"):
        assert leak not in body, leak
    assert "WWW-Authenticate" not in response.headers  # no credentials asked on a foreign name's page
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert response.headers["Cache-Control"] == "no-store"
    said = (f"refused: this dashboard does not answer to the host name {name}" if name else "names no host")
    if response.mimetype == "application/json":
        assert list(json.loads(body)) == ["error"] and said in json.loads(body)["error"]
    else:
        assert response.mimetype == "text/html" and said in body


PATHS = ["/", "/?part=live", "/jobs", "/jobs?state=dead", "/jobs/d1", "/jobs/d1/output.json", "/queues", "/workers",
         "/schedules", "/bulk?action=retry&state=dead", "/static/app.js", "/static/style.css", "/nowhere"]


@pytest.mark.parametrize("with_users", [True, False], ids=["users", "no-users"])
def test_a_foreign_host_gets_421_and_nothing_on_every_address(open_dash, dead, with_users):
    d = open_dash(users=with_users)
    user = "olga" if with_users else None
    for path in PATHS:
        assert d.get(path, user).status_code in (200, 403, 404), path  # served under localhost (the client's Host)
        refused_host(d.get(path, user, headers={"Host": "evil.example:8765"}), "evil.example")
        refused_host(d.get(path, None, headers={"Host": "evil.example"}), "evil.example")  # before any sign-in
    refused_host(d.get("/jobs/d1", user, headers={"Host": "evil.example", "Accept": "application/json"}))
    refused_host(d.get("/jobs/d1/output.json", user, headers={"Host": "evil.example"}))


def test_a_foreign_host_s_action_is_refused_and_changes_nothing(open_dash, dead, db):
    d = open_dash()
    token = token_in(d.get("/jobs/d1").data)
    before = snapshot(db)
    for path in ("/jobs/d1/retry", "/queues/default/pause", "/bulk"):
        r = d.post(path, headers={"Host": "evil.example:8765", "Origin": "http://evil.example:8765",
                                  "Sec-Fetch-Site": "same-origin"}, data={"csrf": token, "action": "retry",
                                                                          "state": "dead"})
        refused_host(r)
    assert snapshot(db) == before
    r = d.post("/jobs/d1/retry", headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
               data={"csrf": token})
    assert r.status_code == 303  # the same action under the name it answers to


def test_loopback_names_on_any_port_and_the_bound_address_are_answered(open_dash, dead):
    d = open_dash(users=None, host="127.0.0.2")
    for host in ("localhost", "localhost:9000", "LOCALHOST.:8765", "127.0.0.1:1", "[::1]:8765",
                 "[0:0::1]", "127.0.0.2:8765"):
        assert d.get("/jobs/d1", None, headers={"Host": host}).status_code == 200, host
    for host in ("127.0.0.3:8765", "[::2]:8765", "localhost.evil.example", "0.0.0.0:8765", "evil.localhost"):
        refused_host(d.get("/jobs/d1", None, headers={"Host": host}), host_of(host))


@pytest.mark.parametrize("bad", ["", "a b", "[evil]:80", "evil.example:80:80", "localhost:99999"])
def test_a_host_header_that_names_no_host_is_refused(open_dash, dead, bad):
    # The app is called as a WSGI server calls it, not through Flask's test client: Werkzeug 3.1.3's
    # (Debian 13's) parses the request's URL itself with Python 3.13's urlsplit, which raises on "[evil]"
    # and on port 99999 before the app sees the request.
    environ = EnvironBuilder(path="/jobs/d1", headers={"Host": bad}).get_environ()
    refused_host(Response.from_app(open_dash(users=None).app, environ), None)


def test_configured_names_and_domains_are_answered(open_dash, dead):
    d = open_dash(hosts=parse_names("queue.example.org .corp.example 192.0.2.10"))
    for host in ("queue.example.org", "Queue.Example.Org:443", "corp.example", "dash.corp.example:8080",
                 "192.0.2.10:8765", "localhost"):
        assert d.get("/jobs/d1", headers={"Host": host}).status_code == 200, host
    for host in ("a.queue.example.org", "example.org", "evilcorp.example", "corp.example.evil", "192.0.2.11"):
        refused_host(d.get("/jobs/d1", headers={"Host": host}), host)


def test_the_address_a_connection_arrived_at_is_answered(open_dash, dead):
    """Bound to every address (0.0.0.0, with users), the dashboard answers the address a request arrived at
    (gunicorn passes the connection), so this host's addresses typed as addresses work; never a name."""
    d = open_dash(host="0.0.0.0")
    with socket.socket() as arrived:  # a connection's own side, as gunicorn passes it
        arrived.bind(("127.0.0.2", 0))
        conn = {"gunicorn.socket": arrived}
        assert d.get("/jobs/d1", headers={"Host": "127.0.0.2:8765"}, environ_base=conn).status_code == 200
        refused_host(d.get("/jobs/d1", headers={"Host": "127.0.0.3:8765"}, environ_base=conn), "127.0.0.3")
    refused_host(d.get("/jobs/d1", headers={"Host": "127.0.0.2"}), "127.0.0.2")  # arrived nowhere known
    refused_host(d.get("/jobs/d1", headers={"Host": "0.0.0.0:8765"}), "0.0.0.0")


def test_a_request_target_in_absolute_form_names_the_host(open_dash, dead):
    """`GET http://evil.example/jobs/d1` (RFC 9112: the target's host is the request's, whatever Host says); gunicorn
    passes the target as RAW_URI. The usual origin form (`/jobs/d1`) names none."""
    d = open_dash(users=None)
    for target, name in (("http://evil.example/jobs/d1", "evil.example"),
                         ("https://user@evil.example:8765/jobs/d1?x=1", "evil.example")):
        refused_host(d.get("/jobs/d1", None, environ_overrides={"RAW_URI": target}), name)
    for target in ("http://localhost:8765/jobs/d1", "/jobs/d1", "/jobs/d1?next=http://evil.example/"):
        assert d.get("/jobs/d1", None, environ_overrides={"RAW_URI": target}).status_code == 200, target
    refused_host(d.get("/jobs/d1", None, environ_overrides={"RAW_URI": "http:///jobs/d1"}), None)


def test_the_prefix_s_redirect_and_its_outside_are_refused_too(open_dash, dead):
    d = open_dash(prefix="/q")
    assert d.get("/q").status_code == 308 and d.get("/jobs").status_code == 404
    for path in ("/q", "/jobs", "/q/jobs/d1", "/q/static/app.js"):
        refused_host(d.get(path, headers={"Host": "evil.example"}))


def test_a_trusted_proxy_s_forwarded_host_is_checked_and_an_untrusted_one_ignored(open_dash, dead, db):
    d = open_dash(hosts=("queue.example.org",))
    # From loopback (the proxy's side) both names must be answered: nginx's Host and the client's.
    ok = d.get("/jobs/d1", headers={"Host": "127.0.0.1:8765", "X-Forwarded-Host": "queue.example.org"})
    assert ok.status_code == 200
    refused_host(d.get("/jobs/d1", headers={"Host": "127.0.0.1:8765", "X-Forwarded-Host": "evil.example"}))
    refused_host(d.get("/jobs/d1", headers={"Host": "evil.example", "X-Forwarded-Host": "queue.example.org"}))
    refused_host(d.get("/jobs/d1", headers={"Host": "localhost", "X-Forwarded-Host": "evil.example, localhost"}))
    refused_host(d.get("/jobs/d1", headers={"Host": "localhost", "X-Forwarded-Host": "a b"}), None)
    # From loopback through a dual-stack socket (::ffff:127.0.0.1) as from 127.0.0.1.
    mapped = {"REMOTE_ADDR": "::ffff:127.0.0.1"}
    refused_host(d.get("/jobs/d1", headers={"Host": "localhost", "X-Forwarded-Host": "evil.example"},
                       environ_base=mapped))
    # From elsewhere the header is anyone's: neither checked nor taken as the origin's host.
    far = {"REMOTE_ADDR": "192.0.2.7"}
    assert d.get("/jobs/d1", headers={"Host": "queue.example.org", "X-Forwarded-Host": "evil.example"},
                 environ_base=far).status_code == 200
    token = token_in(ok.data)
    before = snapshot(db)
    forged = d.post("/jobs/d1/retry", data={"csrf": token}, environ_base=far,
                    headers={"Host": "queue.example.org", "X-Forwarded-Host": "evil.example",
                             "Origin": "http://evil.example"})
    assert forged.status_code == 403 and b"another origin" in forged.data and snapshot(db) == before
    # Through the proxy, the browser's origin is the forwarded name's.
    r = d.post("/jobs/d1/retry", data={"csrf": token}, headers={
        "Host": "127.0.0.1:8765", "X-Forwarded-Host": "queue.example.org", "Origin": "http://queue.example.org",
        "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 303


def test_rebinding_cannot_borrow_the_trusted_proxy_s_user_header(open_dash, dead, db):
    """A page rebound to 127.0.0.1 in a browser on this host sends from loopback, and a script may add any
    header that is not forbidden (X-Remote-User, X-Forwarded-Host): its Host still names its own name."""
    d = open_dash(user_header="X-Remote-User")
    token = token_in(d.get("/jobs/d1", None, headers={"X-Remote-User": "olga"}).data)
    before = snapshot(db)
    for headers in ({"Host": "evil.example:8765"}, {"Host": "evil.example:8765", "X-Forwarded-Host": "localhost"}):
        refused_host(d.get("/jobs/d1", None, headers={**headers, "X-Remote-User": "olga"}))
        refused_host(d.post("/jobs/d1/retry", None, data={"csrf": token}, headers={
            **headers, "X-Remote-User": "olga", "Origin": "http://evil.example:8765", "Sec-Fetch-Site": "same-origin"}))
    assert snapshot(db) == before


def test_each_refused_name_is_logged_once(open_dash, dead, said, monkeypatch):
    d = open_dash(users=None)
    for _ in range(3):
        for host in ("evil.example:1", "EVIL.example:2", "other.example", ""):
            assert d.get("/", None, headers={"Host": host}).status_code == 421
    assert d.get("/", None).status_code == 200
    assert said == [
        "refusing requests for host evil.example: it answers to localhost, 127.0.0.1, [::1]; --allow-host NAME or"
        " [web] hosts = NAME adds one (said once a name)",
        "refusing requests for host other.example: it answers to localhost, 127.0.0.1, [::1]; --allow-host NAME or"
        " [web] hosts = NAME adds one (said once a name)",
        "refusing requests for host (a Host that names no host): it answers to localhost, 127.0.0.1, [::1];"
        " --allow-host NAME or [web] hosts = NAME adds one (said once a name)"]
    # A flood of names is not a flood of lines: LOGGED names, then one line, then none.
    monkeypatch.setattr(hosts, "LOGGED", 5)
    said.clear()
    for n in range(20):
        assert d.get("/", None, headers={"Host": f"n{n}.example"}).status_code == 421
    assert len(said) == 3 and said[-1] == "refusing requests for more host names; past the first 5, they are not named"
    assert all(f"n{n}.example" in line for n, line in zip(range(2), said))
