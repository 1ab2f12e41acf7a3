"""The dashboard as a WSGI application (Flask): who is asking, what they may do, and the answer's headers.

`create_app` builds it from a WebConfig, the queue's Connections and the users (or None: no one signs
in, and everyone who reaches it may look and no one may act). Before anything else, a request must name a
host it answers to (queuectl.web.hosts: the DNS rebinding guard). The pages are in
queuectl.web.pages, the actions in queuectl.web.actions; both call queuectl.api, never the CLI.
Domain errors become HTTP statuses here, in STATUSES, and nowhere else.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from flask import Flask, g, make_response, render_template, request
from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header

from queuectl.domain.errors import (Conflict, DatabaseUnavailable, InvalidConfig, InvalidInput, NotFound, PermissionDenied,
                             QueuectlError)
from queuectl.web import actions, hosts, pages, security
from queuectl.web.config import WebConfig
from queuectl.domain.models import printable
from queuectl.domain.recurrence import Rule
from queuectl.web.actions import said_text
from queuectl.web.charts import seconds
from queuectl.web.users import Checker

HERE = Path(__file__).resolve().parent
#: HTTP statuses of domain errors, most specific class first.
STATUSES: tuple[tuple[type[QueuectlError], int], ...] = (
    (PermissionDenied, 403),
    (NotFound, 404),
    (Conflict, 409),
    (InvalidInput, 400),
    (DatabaseUnavailable, 503),
    (InvalidConfig, 500),
    (QueuectlError, 500),
)
#: The largest request body accepted (bytes): forms of filters and ids, never uploads.
MAX_BODY = 64 * 1024


def status_for(error: QueuectlError) -> int:
    """Return the HTTP status of a domain error."""
    return next(code for cls, code in STATUSES if isinstance(error, cls))


class Prefixed:
    """WSGI middleware that serves the application under `prefix` ("" for none): paths outside it are 404,
    and the application sees the prefix as its SCRIPT_NAME, so that every link it makes carries it."""

    def __init__(self, app, prefix: str):
        self.app = app
        self.prefix = prefix

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if self.prefix:
            if path == self.prefix:
                start_response("308 Permanent Redirect", [("Location", self.prefix + "/"), ("Content-Length", "0"),
                                                          *security.HEADERS.items()])
                return [b""]
            if not path.startswith(self.prefix + "/"):
                said = f"not found: this server answers under {self.prefix}/"
                body, kind = ((json.dumps({"error": said}).encode(), "application/json") if wants_json(environ)
                              else ((said + "\n").encode(), "text/plain; charset=utf-8"))
                start_response("404 Not Found", [("Content-Type", kind), ("Content-Length", str(len(body))),
                                                 *security.HEADERS.items()])
                return [body]
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
            environ["PATH_INFO"] = path[len(self.prefix):]
        return self.app(environ, start_response)


def create_app(cfg: WebConfig, connections, users: dict | None, allowed: hosts.Allowed | None = None, say=None):
    """Return the dashboard's WSGI application (see the module's docstring), answering to the `allowed` host
    names only (default: those of `cfg`'s bind and hosts; queuectl.web.hosts); `say(line)` logs each refused
    host name once (default: to stderr)."""
    app = Flask("queuectl.web", root_path=str(HERE), static_folder="static", template_folder="templates")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.extensions["queuectl"] = connections
    app.jinja_env.autoescape = True  # every template, whatever its name: user data is always escaped
    app.jinja_env.filters.update(isotime=_isotime, localtime=_localtime, duration=seconds, rule=Rule.of)
    key = os.urandom(32)
    app.secret_key = key  # signs what an action says on the page it redirects to (actions.said_token)
    checker = Checker(users) if users is not None else None

    @app.before_request
    def who():
        user, role = _user(cfg, users, checker, request)
        if user is None:
            return _challenge()
        g.user, g.role = user, role
        g.may_act = role == "operator" and not cfg.read_only
        g.csrf = security.csrf_token(key, user)
        g.interval = cfg.interval
        if request.method == "POST":
            if not g.may_act:
                raise PermissionDenied("refused: your role may only look" if not cfg.read_only
                                       else "refused: this dashboard is read-only")
            security.check_post(key, user, request.form.get(security.FIELD), request.headers,
                                hosts.asked_host(request.environ))
        return None

    @app.after_request
    def headers(response):
        for name, value in security.HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @app.errorhandler(QueuectlError)
    def domain_error(e):
        return error(status_for(e), printable(str(e)))

    @app.errorhandler(404)
    def not_found(e):
        return error(404, "no such page")

    @app.errorhandler(405)
    def not_allowed(e):
        return error(405, "not allowed: changes are POSTs")

    @app.errorhandler(413)
    def too_large(e):
        return error(413, "the request is too large")

    @app.context_processor
    def common():
        signed_in = g.get("user") is not None  # nothing of the database for a visitor asked to sign in
        return {"said": said_text(request.args.get("said")), "user": g.get("user"), "role": g.get("role"),
                "may_act": g.get("may_act", False), "csrf_field": security.FIELD, "csrf": g.get("csrf", ""),
                "interval": g.get("interval", 3), "db": connections.describe() if signed_in else ""}

    pages.register(app)
    actions.register(app)
    allowed = allowed or hosts.Allowed.served(cfg.hosts, [cfg.host])
    app.wsgi_app = hosts.HostCheck(Prefixed(app.wsgi_app, cfg.prefix), allowed, wants_json, say)
    return app


def _user(cfg: WebConfig, users: dict | None, checker, request) -> tuple[str | None, str]:
    """Return (the user's name, their role) for `request`, or (None, "") to ask for credentials.

    A trusted reverse proxy's header names the user when configured and the request comes from this
    host (the proxy's side); else HTTP Basic authentication against the users file; with no users file
    everyone is "anonymous", a viewer. Raises PermissionDenied for a header's user not in the file.
    """
    if cfg.user_header and hosts.from_proxy(request.environ):
        name = request.headers.get(cfg.user_header)
        if name:
            user = (users or {}).get(name)
            if user is None:
                raise PermissionDenied(f"refused: {cfg.user_header} names no user of the users file")
            return user.name, user.role
    if checker is None:
        return "anonymous", "viewer"
    auth = request.authorization
    if auth is None or auth.type != "basic" or not auth.username or auth.password is None:
        return None, ""
    user = checker.check(auth.username, auth.password)
    return (user.name, user.role) if user is not None else (None, "")


def _isotime(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def _localtime(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def error(status: int, message: str):
    """The answer to a refused or failed request: {"error": message} for a .json address or a client that
    prefers JSON, else the error page; `message` is already fit to print."""
    if wants_json(request.environ):
        return make_response({"error": message}, status)
    return make_response(render_template("error.html", status=status, message=message), status)


def wants_json(environ) -> bool:
    """Whether an answer to the request is JSON: a .json address, or a client that prefers JSON."""
    return (environ.get("PATH_INFO", "").endswith(".json")
            or parse_accept_header(environ.get("HTTP_ACCEPT"), MIMEAccept).best == "application/json")


def _challenge():
    response = error(401, "sign in to see the queue")
    response.headers["WWW-Authenticate"] = 'Basic realm="queuectl", charset="UTF-8"'
    return response
