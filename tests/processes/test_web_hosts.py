"""The host names `queuectl web` answers to, as a real process (gunicorn) is asked for them: raw requests naming a
host it was not told about get 421 and nothing of the queue on every address, the names of --allow-host and of
the site file's [web] hosts are answered, a dashboard bound to every address answers the address a request
arrived at, and its log names each refused host once and its first line the names it answers to."""

from __future__ import annotations

import base64
import json
import re
import socket

import pytest

from support.cli import dead_job
from support.webserver import SECRET, USERS, WebServer, request

PATHS = ("/", "/?part=live", "/jobs", "/jobs/j-dead", "/jobs/j-dead/output.json", "/queues", "/workers",
         "/schedules", "/static/app.js", "/static/style.css")


@pytest.fixture
def serve(web, users, db):
    """Start `queuectl web` (the tier's `web`) with the users of `users`, on a queue with one dead job, j-dead, whose
    command and output hold SECRET."""
    dead_job(db, id="j-dead", command=f"echo {SECRET}; exit 3")
    return lambda *args, **kw: web(*args, users=users, **kw)


def get(server: WebServer, path: str, host: str, address: str = "127.0.0.1", **headers) -> tuple[int, dict, str]:
    """GET `path` from the server at `address` as olga, with `host` as the request's Host."""
    return request(f"http://{address}:{server.port}{path}", user="olga", headers={"Host": host, **headers})


def assert_refused(answer: tuple[int, dict, str], name: str) -> None:
    status, headers, body = answer
    assert status == 421, (status, body[:300])
    assert SECRET not in body and "j-dead" not in body and "<table" not in body, body
    assert f"does not answer to the host name {name}" in body
    assert headers["content-security-policy"].startswith("default-src 'none'") and "www-authenticate" not in headers


def refusals(server: WebServer, name: str) -> list[str]:
    return [line for line in server.log().splitlines() if f"refusing requests for host {name}:" in line]


def test_a_foreign_host_gets_421_and_no_data_on_every_address_and_the_allowed_name_everything(serve):
    server = serve("--allow-host", "queue.example.test")
    for path in PATHS:
        for host in ("rebind.example.test", f"rebind.example.test:{server.port}"):
            assert_refused(get(server, path, host), "rebind.example.test")
        status, _, body = get(server, path, f"queue.example.test:{server.port}")
        assert status == 200, (path, status, body[:300])
    assert SECRET in get(server, "/jobs/j-dead/output.json", "queue.example.test")[2]  # what was refused above
    assert_refused(get(server, "/jobs/j-dead", "rebind.example.test", Accept="application/json"),
                   "rebind.example.test")
    assert json.loads(get(server, "/jobs", "rebind.example.test", Accept="application/json")[2])["error"].startswith(
        "refused: this dashboard does not answer to the host name rebind.example.test")
    assert len(refusals(server, "rebind.example.test")) == 1, server.log()  # 24 requests, one line
    assert re.search(rf"serving the dashboard on http://127\.0\.0\.1:{server.port}/ for host names localhost, "
                     r"127\.0\.0\.1, \[::1\], queue\.example\.test \(users of ", server.log()), server.log()


def test_the_site_file_s_hosts_are_answered_and_allow_host_replaces_them(serve, tmp_path, monkeypatch):
    site = tmp_path / "queuectl.conf"
    site.write_text("[web]\nhosts = a.example.test, .b.example.test\n")
    monkeypatch.setenv("QUEUECTL_CONFIG", str(site))
    from_file = serve()
    for host in ("a.example.test", "b.example.test:8080", "x.b.example.test"):
        assert get(from_file, "/jobs/j-dead", host)[0] == 200, host
    assert_refused(get(from_file, "/jobs/j-dead", "c.example.test"), "c.example.test")
    given = serve("--allow-host", "c.example.test")
    assert get(given, "/jobs/j-dead", "c.example.test")[0] == 200
    assert_refused(get(given, "/jobs/j-dead", "a.example.test"), "a.example.test")


def test_bound_to_every_address_it_answers_the_address_a_request_arrived_at(serve):
    server = serve(host="0.0.0.0")
    assert get(server, "/jobs/j-dead", f"127.0.0.2:{server.port}", address="127.0.0.2")[0] == 200
    assert_refused(get(server, "/jobs/j-dead", f"127.0.0.3:{server.port}", address="127.0.0.2"), "127.0.0.3")
    assert_refused(get(server, "/jobs/j-dead", f"0.0.0.0:{server.port}"), "0.0.0.0")
    assert ("for host names localhost, 127.0.0.1, [::1], and the address of this host a request arrives at (users of"
            in server.log()), server.log()


def raw(port: int, lines: list[str]) -> str:
    """Send one request of `lines` as they are (no client rewrites them) and return the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join([*lines, "Connection: close", "", ""])).encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer.decode("utf-8", "replace")


def test_a_request_target_in_absolute_form_is_judged_by_its_host(serve):
    """`GET http://name/path` (RFC 9112: the target's host is the request's, whatever Host says), which gunicorn
    serves as /path."""
    server = serve()
    credentials = "Authorization: Basic " + base64.b64encode(b"olga:" + USERS["olga"][1].encode()).decode()
    host = f"Host: 127.0.0.1:{server.port}"
    answer = raw(server.port, ["GET http://rebind.example.test/jobs/j-dead HTTP/1.1", host, credentials])
    assert answer.startswith("HTTP/1.1 421 ") and SECRET not in answer and "j-dead" not in answer.split("\r\n\r\n")[1]
    answer = raw(server.port, [f"GET http://localhost:{server.port}/jobs/j-dead HTTP/1.1", host, credentials])
    assert answer.startswith("HTTP/1.1 200 ") and "j-dead" in answer


def test_on_a_dual_stack_socket_an_ipv4_loopback_peer_is_the_proxy_s_side(serve):
    """Bound to [::] (IPv4 peers come as ::ffff:127.0.0.1), the trusted proxy's headers are believed from
    127.0.0.1 as from ::1: its user header names the user, its X-Forwarded-Host is checked."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::", 0))
    except OSError as e:
        pytest.skip(f"no IPv6 here: {e.strerror}")
    server = serve("--user-header", "X-Remote-User", host="[::]")
    url = f"http://127.0.0.1:{server.port}/jobs/j-dead"
    status, _, body = request(url, headers={"X-Remote-User": "olga"})
    assert status == 200 and "olga (operator)" in body, (status, body[:300])
    status, _, body = request(url, headers={"X-Remote-User": "olga", "X-Forwarded-Host": "rebind.example.test"})
    assert status == 421 and "j-dead" not in body
