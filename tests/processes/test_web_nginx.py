"""docs/web.md's nginx server block, run for real: nginx as a process of its own (its configuration in a temporary
directory, on a free port; not the system's service) in front of `queuectl web --url-prefix /queuectl`. Every page
and every link on them answers through it under the prefix; an operator's action passes through it with their
credentials and the form's token, a viewer's and a cross-origin one do not; and with the block's optional lines
nginx signs users in and the dashboard takes the name from X-Remote-User, whatever the client sent."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from queuectl.store import open_store
from support.cli import dead_job, queuectl
from support.pgserver import free_port, poll_until
from support.webserver import USERS, WebServer, request, users_file

REPO = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx): docs/web.md's"
                                                      " nginx block is not tested")
PREFIX = "/queuectl"
#: The pages every run fetches through nginx; JOB is the dead job each test makes.
JOB = "j-dead"
PAGES = ("/", "/?part=live", "/jobs", "/jobs?state=dead", f"/jobs/{JOB}", f"/jobs/{JOB}/output.json", "/queues",
         "/workers", "/schedules")
#: The optional lines of the block (commented out in the docs), which the header test turns on.
OPTIONAL = ('# auth_basic "queuectl";', "# auth_basic_user_file /etc/nginx/queuectl.htpasswd;",
            "# proxy_set_header X-Remote-User $remote_user;")


def server_block(port: int, upstream: int, htpasswd: Path | None) -> str:
    """docs/web.md's nginx block with this test's ports, and its optional lines on when `htpasswd` is given."""
    text = (REPO / "docs" / "web.md").read_text()
    [block] = re.findall(r"```nginx\n(.*?)\n```", text, re.S)
    swaps = [("listen 80;", f"listen 127.0.0.1:{port};"),
             ("proxy_pass http://127.0.0.1:8765;", f"proxy_pass http://127.0.0.1:{upstream};")]
    if htpasswd is not None:
        swaps += [(OPTIONAL[0], OPTIONAL[0][2:]), (OPTIONAL[1], f"auth_basic_user_file {htpasswd};"),
                  (OPTIONAL[2], OPTIONAL[2][2:])]
    for old, new in swaps:
        assert block.count(old) == 1, f"docs/web.md's nginx block no longer holds {old!r} once"
        block = block.replace(old, new)
    return block


class Nginx:
    """nginx in the foreground, one process (no master, so no user switch), everything it writes under `home`."""

    def __init__(self, home: Path, block: str, port: int):
        self.home, self.port = home, port
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (home / d).mkdir(parents=True)
        temp = "".join(f"    {d}_temp_path {home / d};\n" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        temp = temp.replace(f"client_body_temp_path {home / 'client_body'}", f"client_body_temp_path {home / 'body'}")
        (home / "nginx.conf").write_text(
            f"daemon off;\nmaster_process off;\npid {home / 'nginx.pid'};\nerror_log {home / 'error.log'} info;\n"
            f"events {{ worker_connections 64; }}\nhttp {{\n    access_log {home / 'access.log'};\n{temp}{block}\n}}\n")
        self.proc = subprocess.Popen([NGINX, "-e", str(home / "error.log"), "-p", str(home), "-c",
                                      str(home / "nginx.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        poll_until(lambda: self.answers(), "nginx answering")

    def answers(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"nginx exited {self.proc.returncode}: {self.proc.stderr.read().decode()}"
                                 f"{self.log()}")
        try:
            fetch(self.port, "/")
            return True
        except OSError:
            return False

    def log(self) -> str:
        path = self.home / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # a graceful stop
            self.proc.wait(15)


def fetch(port: int, path: str, user: str | None = None, method: str = "GET", form: dict | None = None,
          headers: dict | None = None) -> tuple[int, dict, str]:
    """support.webserver.request to 127.0.0.1:`port`: (status, headers, body)."""
    return request(f"http://127.0.0.1:{port}{path}", method, user, form, headers)


class Links(HTMLParser):
    """Every href, src and form action of a page, and the forms' CSRF tokens."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.tokens: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.links += [a[k] for k in ("href", "src", "action") if a.get(k)]
        if tag == "input" and a.get("name") == "csrf":
            self.tokens.add(a["value"])


def parsed(body: str) -> Links:
    links = Links()
    links.feed(body)
    return links


@pytest.fixture
def jobs(db) -> None:
    """In `db`, JOB dead (its command holds markup) and another pending, made by real processes."""
    dead_job(db, id=JOB, command="echo '<b>x</b>'; exit 3")
    queuectl(db, "enqueue", "--id", "j-later", "--delay", "3600", "--", "true")


def state(db: str, job_id: str) -> str:
    with open_store(db) as store:
        return store.get_job(job_id).state.value


def htpasswd(path: Path) -> Path:
    """nginx's users file: USERS' passwords as salted SHA-1 ({SSHA}, RFC 2307), which nginx reads itself."""
    lines = []
    for name, (_, pw) in USERS.items():
        salt = os.urandom(8)
        lines.append(f"{name}:{{SSHA}}{base64.b64encode(hashlib.sha1(pw.encode() + salt).digest() + salt).decode()}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def proxied(db, jobs, tmp_path):
    """Start (dashboard, nginx) on `db` and its `jobs`, for `mode` "password" (the dashboard checks passwords) or
    "header" (nginx does)."""
    started = []

    def start(mode: str, *extra: str):
        """`extra`: more arguments of `queuectl web`."""
        header = mode == "header"
        if header:  # users who sign in at nginx alone (hash '-')
            (tmp_path / "web-users").write_text("".join(f"{name}:{role}:-\n" for name, (role, _) in USERS.items()))
        users = str(tmp_path / "web-users") if header else users_file(tmp_path / "web-users")
        web = WebServer(db, tmp_path, *(["--user-header", "X-Remote-User"] if header else []), *extra, prefix=PREFIX,
                        users=users)
        started.append(web.start())
        port = free_port()
        block = server_block(port, web.port, htpasswd(tmp_path / "htpasswd") if header else None)
        proxy = Nginx(tmp_path / f"nginx-{port}", block, port)
        started.append(proxy)
        return web, proxy

    yield start
    for process in reversed(started):
        process.stop()


def crawl(port: int, user: str, host: str | None = None) -> dict[str, str]:
    """GET every page of PAGES through nginx under the prefix (asking for `host`, if given, as a browser that
    typed that name), then every link they hold once; return {path: body} of the pages. Each answers 200 and
    every link stays under the prefix."""
    named = {"Host": host} if host else {}
    bodies, seen = {}, set()
    for page in PAGES:
        status, headers, body = fetch(port, PREFIX + page, user, headers=named)
        assert status == 200, (page, status, body[:300])
        bodies[page] = body
        for link in parsed(body).links if headers["content-type"].startswith("text/html") else []:
            target = urlsplit(urljoin(PREFIX + page, link))
            assert not target.netloc and target.path.startswith(PREFIX + "/"), (page, link)
            seen.add(target.path + (f"?{target.query}" if target.query else ""))
    for path in sorted(seen):
        if re.search(r"/(retry|cancel|pause|resume)$", path.split("?")[0]):  # a form's action: a POST, below
            assert fetch(port, path, user, headers=named)[0] in (404, 405), path  # a GET changes nothing
            continue
        status, _, body = fetch(port, path, user, headers=named)
        assert status == 200, (path, status, body[:300])
    assert any("/jobs/" in p for p in seen) and any(p.endswith(".css") for p in seen)
    return bodies


def post(port: int, path: str, user: str, token: str, origin: str | None = None, **headers) -> tuple[int, dict, str]:
    """POST a form with `token` through nginx, as a browser on nginx's origin (or `origin`) sends it."""
    return fetch(port, PREFIX + path, user, "POST", {"csrf": token},
                 {"Origin": origin or f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin", **headers})


def token_of(port: int, user: str) -> str:
    [token] = parsed(fetch(port, f"{PREFIX}/jobs/{JOB}", user)[2]).tokens
    return token


def test_every_page_and_an_operators_retry_pass_through_nginx_under_the_prefix(db, proxied):
    web, proxy = proxied("password")
    port = proxy.port
    bodies = crawl(port, "olga")
    assert "&lt;b&gt;x&lt;/b&gt;" in bodies[f"/jobs/{JOB}"] and "<b>x</b>" not in bodies[f"/jobs/{JOB}"]
    status, headers, _ = fetch(port, PREFIX)  # the prefix without its slash: nginx's redirect to it
    assert status == 301 and urlsplit(headers["location"]).path == PREFIX + "/"
    status, headers, _ = fetch(port, PREFIX + "/")
    assert status == 401 and headers["www-authenticate"].startswith("Basic")
    assert fetch(port, "/jobs")[0] == 404  # outside the prefix: not proxied at all
    token = token_of(port, "olga")
    # Refused, and nothing changed: another origin, no token, a viewer (with a token of their own).
    assert post(port, f"/jobs/{JOB}/retry", "olga", token, origin="http://evil.example")[0] == 403
    assert fetch(port, f"{PREFIX}/jobs/{JOB}/retry", "olga", "POST", {}, {"Sec-Fetch-Site": "same-origin"})[0] == 403
    assert post(port, f"/jobs/{JOB}/retry", "victor", token)[0] == 403  # a viewer's page has no form, no token
    assert state(db, JOB) == "dead"
    status, headers, _ = post(port, f"/jobs/{JOB}/retry", "olga", token)
    assert status == 303, web.log()
    assert urlsplit(headers["location"]).path == f"{PREFIX}/jobs/{JOB}"
    assert state(db, JOB) == "pending"
    status, _, body = fetch(port, headers["location"], "olga")  # where the redirect leads, through nginx
    assert status == 200 and "retried" in body


def test_with_the_optional_lines_nginx_signs_users_in_and_names_them_in_x_remote_user(db, proxied):
    web, proxy = proxied("header")
    port = proxy.port
    status, headers, _ = fetch(port, PREFIX + "/")
    assert status == 401 and headers["www-authenticate"] == 'Basic realm="queuectl"'  # nginx's, not the dashboard's
    crawl(port, "victor")
    # nginx replaces the client's header with the user it signed in: victor claiming to be olga stays victor.
    token = token_of(port, "olga")
    assert post(port, f"/jobs/{JOB}/retry", "victor", token, **{"X-Remote-User": "olga"})[0] == 403
    assert state(db, JOB) == "dead"
    status, _, _ = post(port, f"/jobs/{JOB}/retry", "olga", token)
    assert status == 303, web.log()
    assert state(db, JOB) == "pending"
    # The dashboard itself, reached directly from this host, takes the header as nginx would send it.
    assert request(web.url + "/", headers={"X-Remote-User": "victor"})[0] == 200
    assert request(web.url + "/", headers={"X-Remote-User": "mallory"})[0] == 403


def test_the_public_name_is_answered_once_allowed_and_refused_before(db, proxied):
    """nginx passes the name the browser typed (Host $http_host): the dashboard refuses it (421, nothing of the
    queue) until it is allowed, as docs/web.md's command line does with --allow-host; then every page and an
    operator's action work under it."""
    public = "queue.example.org"
    web, proxy = proxied("password")
    host = f"{public}:{proxy.port}"
    for page in PAGES:
        status, _, body = fetch(proxy.port, PREFIX + page, "olga", headers={"Host": host})
        assert status == 421 and JOB not in body and "<b>x" not in body, (page, status, body[:300])
        assert f"does not answer to the host name {public}" in body
    assert sum(f"refusing requests for host {public}:" in line for line in web.log().splitlines()) == 1, web.log()
    web, proxy = proxied("password", "--allow-host", public)
    host = f"{public}:{proxy.port}"
    crawl(proxy.port, "olga", host)
    [token] = parsed(fetch(proxy.port, f"{PREFIX}/jobs/{JOB}", "olga", headers={"Host": host})[2]).tokens
    status, headers, _ = post(proxy.port, f"/jobs/{JOB}/retry", "olga", token, origin=f"http://{host}", Host=host)
    assert status == 303, web.log()
    assert state(db, JOB) == "pending"
    assert "refusing requests" not in web.log()
