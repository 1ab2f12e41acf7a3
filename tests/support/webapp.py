"""The dashboard's WSGI application in-process for the fast tier: Flask's test client on a real SQLite file,
with the users of tests/support/webserver.py (USERS) and Basic credentials for each."""

from __future__ import annotations

import base64
import re

from queuectl.api.database import Database
from queuectl.web.app import create_app
from queuectl.web.config import WebConfig
from queuectl.web.reads import Connections
from queuectl.web.users import load
from support.webserver import USERS, users_file


class Counting:
    """A store that counts the calls of its methods."""

    def __init__(self, store, calls: list):
        self._store, self._calls = store, calls

    def __getattr__(self, name):
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def counted(*args, **kw):
            self._calls.append(name)
            return value(*args, **kw)
        return counted


def auth(user: str, password: str | None = None) -> dict:
    """The Authorization header of `user` (of USERS, or with `password`)."""
    secret = USERS[user][1] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


def token_in(body: bytes) -> str:
    """The CSRF token of the page's forms."""
    return re.search(rb'name="csrf" value="([0-9a-f]+)"', body).group(1).decode()


class Dashboard:
    """`create_app` on the database `db` with `cfg` (WebConfig's fields); `users`: a users file (True: one of
    USERS made in `tmp_path`), or None; `units`: the worker units' reader (queuectl.web.reads.Connections);
    `say`: what logs a refused host name (create_app). `client` is Flask's test client; `connections` the
    app's."""

    def __init__(self, db: str, tmp_path, users: bool | str = True, open_store=None, units=None, say=None, **cfg):
        Database(db, "test").store().close()  # made, as `queuectl web` makes it before serving
        if users is True:
            users = users_file(tmp_path / "web-users")
        self.cfg = WebConfig(users=users or None, **cfg)
        opener = open_store or (lambda read_only: Database(db, "test").store(read_only=read_only))
        self.connections = Connections(opener, self.cfg.interval, units=units)
        self.app = create_app(self.cfg, self.connections, load(users) if users else None, say=say)
        self.client = self.app.test_client()

    def get(self, path: str, user: str | None = "olga", **kw):
        headers = {**(auth(user) if user else {}), **kw.pop("headers", {})}
        return self.client.get(path, headers=headers, **kw)

    def post(self, path: str, user: str | None = "olga", **kw):
        headers = {**(auth(user) if user else {}), **kw.pop("headers", {})}
        return self.client.post(path, headers=headers, **kw)

    def close(self) -> None:
        self.connections.close()
