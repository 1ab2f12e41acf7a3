"""queuectl-web.socket and queuectl-web.service from the .deb under a real systemd (Debian 12 and 13).

The tests run in order on one container, as an admin would: install, enable the socket, the first
connection starts the service, users and roles, a clean stop, a worker unit's state on /workers (systemd
asked from inside the sandbox), the sandbox's score, and a bind beyond loopback without users refused
(exit 78, not restarted).
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse

import pytest

from .container import SRV, apt, place_deb, container_until

SOCKET, SERVICE = "queuectl-web.socket", "queuectl-web.service"
URL = "http://127.0.0.1:8765/"
USERS = "/etc/queuectl/web-users"
CONF = "/etc/queuectl/queuectl.conf"
#: GET argv[1] (or POST the form argv[2] to it) with Debian's python3 inside the container (curl is not
#: in a minimal Debian 13); "USER:PASSWORD" on stdin, if any, as HTTP Basic credentials; $REQUEST_HOST, if
#: set, as the Host header (the name a browser would have typed). Prints the status, a newline, the body
#: (after redirects).
REQUEST = """
import base64, os, sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode() if len(sys.argv) > 2 else None)
if os.environ.get("REQUEST_HOST"):
    request.add_header("Host", os.environ["REQUEST_HOST"])
credentials = sys.stdin.read()
if credentials:
    request.add_header("Authorization", "Basic " + base64.b64encode(credentials.encode()).decode())
try:
    with urllib.request.urlopen(request, timeout=30) as response:
        status, body = response.status, response.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
sys.stdout.write(f"{status}\\n{body.decode('utf-8', 'replace')}")
"""
#: Connect to argv[1]:argv[2], send a request and wait until the other side closes the connection (an
#: answer, an end or a reset); print what came back.
KNOCK = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60) as s:
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    try:
        print(repr(s.recv(65536)))
    except ConnectionResetError:
        print("reset")
"""


@pytest.fixture(scope="module")
def web_host(booted, deb):
    """The booted container with the package installed (its recommended libraries are on the root)."""
    c = place_deb(booted, deb)
    apt(c, "install", SRV)
    yield c
    c.run("systemctl", "stop", SOCKET, SERVICE, check=False, timeout=60)  # the host's port, shared, is freed


def get(c, url: str = URL, credentials: str = "", form: dict[str, str] | None = None,
        host: str | None = None) -> tuple[int, str]:
    """GET `url` (POST `form` to it, if given) from inside the container, naming `host` if given: (status, body)."""
    body = [urllib.parse.urlencode(form)] if form is not None else []
    out = c.run("python3", "-c", REQUEST, url, *body, input=credentials, timeout=60,
                env={"REQUEST_HOST": host} if host else None).stdout
    status, _, body = out.partition("\n")
    return int(status), body


def state(c, unit: str = SERVICE) -> dict[str, str]:
    return c.show(unit, "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts", "MainPID")


def test_the_deb_ships_the_units_templates_and_static_files(deb):
    paths = set(subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True,
                               check=True).stdout.split())
    for unit in (SOCKET, SERVICE):
        assert f"./usr/lib/systemd/system/{unit}" in paths, unit
    web = {p.rsplit("/queuectl/web/", 1)[1] for p in paths if "/dist-packages/queuectl/web/" in p}
    assert {"templates/base.html", "templates/overview.html", "static/app.js", "static/style.css"} <= web, web
    recommends = subprocess.run(["dpkg-deb", "-f", str(deb), "Recommends"], capture_output=True, text=True).stdout
    assert {"python3-flask", "python3-gunicorn", "python3-bcrypt"} <= set(re.split(r"[,\s]+", recommends))


def test_installed_but_not_enabled(web_host):
    c = web_host
    for unit in (SOCKET, SERVICE):
        assert c.run("systemctl", "cat", unit).returncode == 0
        assert state(c, unit)["ActiveState"] == "inactive", unit
    assert c.run("systemctl", "is-enabled", SOCKET, check=False).stdout.strip() == "disabled"
    # The service has no [Install] of its own (Also= its socket): enabled only through the socket.
    assert c.run("systemctl", "is-enabled", SERVICE, check=False).stdout.strip() == "indirect"


def test_socket_starts_the_service_at_the_first_connection(web_host):
    c = web_host
    c.run("systemctl", "enable", "--now", SOCKET)
    assert c.show(SOCKET, "SubState")["SubState"] == "listening"
    assert (c.root / "etc/systemd/system/sockets.target.wants" / SOCKET).is_symlink()
    assert state(c)["ActiveState"] == "inactive"  # nothing runs until someone connects
    assert not (c.root / "var/lib/queuectl/queuectl.db").exists()
    status, body = get(c)
    assert status == 200 and "<h1>Overview</h1>" in body, (status, body[:2000])
    after = state(c)
    assert (after["ActiveState"], after["SubState"]) == ("active", "running"), after
    assert c.run("ps", "-o", "user=,group=", "-p", after["MainPID"]).stdout.split() == ["queuectl", "queuectl"]
    assert "(from systemd)" in c.journal(SERVICE)  # it served systemd's socket, not one of its own
    # The service made the database: members of group queuectl use it (its umask kept it group-writable).
    c.run("useradd", "--create-home", "--groups", "queuectl", "carol")
    c.run("queuectl", "enqueue", '{"id":"from-carol","command":"true"}', user="carol")
    assert "from-carol" in get(c, URL + "jobs")[1]


def test_users_file_makes_a_sign_in_necessary(web_host):
    c = web_host
    c.run("install", "-m", "0640", "-o", "root", "-g", "queuectl", "/dev/null", USERS)
    c.run("queuectl", "web-user", "set", "alice", "--role", "operator", "--password-stdin", "--file", USERS,
          input="correct horse\n")
    assert c.run("stat", "-c", "%a %U %G", USERS).stdout.split() == ["640", "root", "queuectl"]
    c.run("sh", "-c", f"printf '\\n[web]\\nusers = {USERS}\\n' >> {CONF}")
    c.run("systemctl", "restart", SERVICE)
    assert get(c)[0] == 401
    assert get(c, credentials="alice:wrong horse")[0] == 401
    status, body = get(c, credentials="alice:correct horse")
    assert status == 200 and "<h1>Overview</h1>" in body, (status, body[:2000])
    # An operator's action writes to the queue from inside the sandbox, through the form the page shows.
    page = get(c, URL + "jobs/from-carol", credentials="alice:correct horse")[1]
    action, token = re.search(r'<form method="post" action="([^"]*/cancel[^"]*)".*?name="csrf" value="([0-9a-f]+)"',
                              page, re.S).groups()
    assert get(c, URL.rstrip("/") + action, credentials="alice:wrong horse", form={"csrf": token})[0] == 401
    assert json.loads(c.run("queuectl", "show", "from-carol", "--json").stdout)["state"] == "pending"
    status, body = get(c, URL.rstrip("/") + action, credentials="alice:correct horse", form={"csrf": token})
    assert status == 200, (status, body[:2000], c.journal(SERVICE)[-4000:])
    assert json.loads(c.run("queuectl", "show", "from-carol", "--json").stdout)["state"] == "cancelled"


def test_stop_ends_the_service_cleanly_and_the_socket_starts_it_again(web_host):
    c = web_host
    c.run("systemctl", "stop", SERVICE, timeout=60)
    after = state(c)
    assert (after["ActiveState"], after["Result"], after["ExecMainStatus"]) == ("inactive", "success", "0"), after
    assert "Traceback" not in c.journal(SERVICE)
    assert c.show(SOCKET, "SubState")["SubState"] == "listening"
    assert get(c, credentials="alice:correct horse")[0] == 200
    assert state(c)["ActiveState"] == "active"


def test_the_socket_activated_service_answers_the_configured_name_and_no_other(web_host):
    """[web] hosts = in the site file names the public name: with the socket's address, the names the service
    answers to (its first line lists them); another name gets 421 and nothing of the queue, and the journal
    names it once."""
    c, alice = web_host, "alice:correct horse"
    c.run("sh", "-c", f"printf 'hosts = queue.example.test\\n' >> {CONF}")  # [web] is the file's last section
    c.run("systemctl", "stop", SERVICE, timeout=60)
    status, body = get(c, URL + "jobs/from-carol", alice, host="queue.example.test:8765")
    assert status == 200 and "from-carol" in body, (status, body[:2000])  # the socket started it again
    for _ in range(2):
        status, body = get(c, URL + "jobs/from-carol", alice, host="rebind.example.test:8765")
        assert status == 421 and "from-carol" not in body and "<table" not in body, (status, body[:2000])
        assert "does not answer to the host name rebind.example.test" in body
    assert get(c, URL + "jobs", alice)[0] == 200  # 127.0.0.1, the socket's own address
    # The journal takes the service's lines in their order, a moment after they are written: once a line
    # written after both refusals shows, any second line for the same name would show too.
    assert get(c, URL + "jobs", alice, host="last.example.test")[0] == 421
    journal = container_until(lambda: "host last.example.test:" in (j := c.journal(SERVICE)) and j,
                    "the last refusal in the journal")
    assert sum("refusing requests for host rebind.example.test:" in line for line in journal.splitlines()) == 1, journal
    started = [line for line in journal.splitlines() if "(from systemd)" in line][-1]
    assert "for host names localhost, 127.0.0.1, [::1], queue.example.test (users of" in started, started


def test_the_workers_page_shows_a_worker_unit_of_this_host_and_its_state(web_host):
    """The sandboxed service asks systemd (systemctl show, as user queuectl, over the system bus) for the
    units of this host's workers: a worker unit started here shows its unit, state and restarts as
    `systemctl show` says them."""
    c, unit = web_host, "queuectl-worker@webunit.service"
    c.run("systemctl", "start", unit, timeout=60)
    try:
        assert c.show(unit, "ActiveState")["ActiveState"] == "active"

        def row() -> str:
            status, body = get(c, URL + "workers", credentials="alice:correct horse")
            assert status == 200, (status, body[:2000])
            found = re.search(r"<tr><td>webunit</td>.*?</tr>", body, re.S)
            return found.group(0) if found else ""

        # The page's snapshot is read every interval and the units every 10 s: a row may be older.
        container_until(lambda: "active (running)" in row(), "the worker's unit state on /workers", timeout=90)
        shown = row()
        props = c.show(unit, "ActiveState", "SubState", "NRestarts")
        assert f'<td class="unit">{unit}</td>' in shown, shown
        assert f'<td class="unit-state">{props["ActiveState"]} ({props["SubState"]})</td>' in shown, shown
        assert f'<td class="restarts">{props["NRestarts"]}</td>' in shown, shown
        assert "Traceback" not in c.journal(SERVICE)
    finally:
        c.run("systemctl", "stop", unit, timeout=120)


def test_sandbox_exposure_is_at_most_4(web_host):
    r = web_host.run("systemd-analyze", "security", "--no-pager", SERVICE, check=False)
    found = re.search(rf"Overall exposure level for {re.escape(SERVICE)}: (\d+\.\d+)", r.stdout + r.stderr)
    assert found, r.stdout + r.stderr
    print(f"{web_host.machine}: systemd-analyze security {SERVICE}: {found.group(1)}")
    assert float(found.group(1)) <= 4.0, r.stdout


def test_beyond_loopback_without_users_exits_78_and_is_not_restarted(web_host):
    c = web_host
    c.run("sed", "-i", f"s#^users = {USERS}$##", CONF)
    c.write(f"/etc/systemd/system/{SOCKET}.d/wide.conf", "[Socket]\nListenStream=\nListenStream=0.0.0.0:8766\n")
    c.run("systemctl", "stop", SERVICE, SOCKET, timeout=60)
    c.run("systemctl", "daemon-reload")
    c.run("systemctl", "start", SOCKET)
    # The refusing service closes the waiting connection (else systemd would start it again for it, until
    # its start limit, and the client would hang until then).
    assert c.run("python3", "-c", KNOCK, "127.0.0.1", "8766").stdout.strip() in ("reset", "b''")
    container_until(lambda: state(c)["ActiveState"] == "failed", f"{SERVICE} to fail")
    after = state(c)
    assert (after["Result"], after["ExecMainStatus"], after["NRestarts"]) == ("exit-code", "78", "0"), after
    journal = c.journal(SERVICE)
    refusals = [line for line in journal.splitlines() if "refusing to listen on 0.0.0.0 without users" in line]
    assert len(refusals) == 1 and "Traceback" not in journal, journal
    assert c.show(SOCKET, "SubState")["SubState"] == "listening"  # the next connection tries again, once
