"""Serving the dashboard in the foreground with gunicorn: one process (so that every page shares one snapshot
of the queue: queuectl.web.reads), THREADS request threads.

Under systemd's socket activation (queuectl-web.socket: LISTEN_FDS and LISTEN_PID set for this process)
gunicorn serves the sockets systemd passed, and tells systemd it is ready (Type=notify); else it binds
the configured address, resolved once and checked: gunicorn is given the numeric address checked, never
a name to resolve again. Either way, an address beyond loopback without users is refused before
anything is served (queuectl.web.config.check_exposure, on addresses, never on names).
"""

from __future__ import annotations

import os
import socket
from typing import NamedTuple

from queuectl.domain.errors import InvalidConfig, QueuectlError
from queuectl.web.config import WebConfig, check_exposure

#: Request threads: a page's reads wait on the one reading connection, so more would only queue there.
THREADS = 8
#: Seconds a request may take before gunicorn restarts its worker, and that a stop waits for requests.
TIMEOUT, GRACEFUL = 60, 5


def _passed_fds(environ) -> range | None:
    """Return the descriptors systemd passed this process (sd_listen_fds(3)), or None when it passed none."""
    try:
        count = int(environ.get("LISTEN_FDS", "0"))
        pid = int(environ.get("LISTEN_PID", "0"))
    except ValueError:
        return None
    if count <= 0 or pid != os.getpid():
        return None
    return range(3, 3 + count)


def inherited_sockets(environ=os.environ) -> list[tuple[str, int]] | None:
    """Return the (host, port) of each TCP socket systemd passed this process (sd_listen_fds(3)), or None when
    it passed none; raises InvalidConfig for a passed socket that is not a listening TCP one."""
    fds = _passed_fds(environ)
    if fds is None:
        return None
    addresses = []
    for fd in fds:
        sock = socket.socket(fileno=os.dup(fd))
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                raise InvalidConfig(f"the socket systemd passed (fd {fd}) is not a TCP stream socket; ListenStream="
                                    " takes ADDRESS:PORT")
            addresses.append(sock.getsockname()[:2])
        finally:
            sock.close()
    return addresses


def turn_away(environ=os.environ) -> int:
    """Close the connections waiting on the sockets systemd passed (none if it passed none); return how many.

    Called before exiting on a bad configuration (78): a connection left waiting would have systemd start
    the service again at once, and again, until its start limit (the socket unit then fails too); closed,
    the service stays down until the next connection, and that client is not left hanging."""
    closed = 0
    for fd in _passed_fds(environ) or ():
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.setblocking(False)
            while True:
                conn, _ = sock.accept()
                conn.close()
                closed += 1
        except OSError:  # BlockingIOError: none left; anything else: not a listening socket
            pass
        finally:
            sock.close()
    return closed


class Listen(NamedTuple):
    """Where the dashboard listens: numeric (host, port) `addresses`, and whether systemd `passed` the sockets
    (else the one address is bound by gunicorn: the address checked, never a name resolved again)."""

    addresses: list
    passed: bool


def resolve(cfg: WebConfig) -> tuple[str, int]:
    """Return the numeric address to bind for `cfg`'s host (a name: its first IPv4 address, else its first);
    raises InvalidConfig for a name that resolves to none, and (check_exposure) when any address it resolves to
    is beyond loopback without users: "localhost" or a host name is held by what it resolves to, not its name."""
    family = socket.AF_INET6 if ":" in cfg.host else socket.AF_UNSPEC
    try:
        infos = socket.getaddrinfo(cfg.host, cfg.port, family, socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InvalidConfig(f"cannot listen on {cfg.origin}: {e.strerror}") from None
    addresses = [info[4][0] for info in sorted(infos, key=lambda info: info[0] != socket.AF_INET)]
    for address in addresses:
        check_exposure(address, cfg.users, cfg.host)
    return addresses[0], cfg.port


def where_to_listen(cfg: WebConfig, environ=os.environ) -> Listen:
    """Return where to listen: the sockets systemd passed, else `cfg`'s bind resolved (resolve) and tried.

    Raises InvalidConfig for an address beyond loopback without users (check_exposure: on each passed
    socket's bound address; on every address a name resolves to), or a passed socket that is not TCP; and
    QueuectlError, in one line, for an address in use now (rather than gunicorn's retries)."""
    passed = inherited_sockets(environ)
    if passed is not None:
        for address, _port in passed:
            check_exposure(address, cfg.users)
        return Listen(passed, True)
    host, port = resolve(cfg)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise QueuectlError(f"cannot listen on {cfg.origin}: {e.strerror}") from None
    return Listen([(host, port)], False)


def serve(cfg: WebConfig, app, say, at_exit=None, listen: Listen | None = None, answers: str = "") -> None:
    """Serve `app` until SIGTERM, SIGINT or SIGHUP (each a graceful stop) where `listen` says (default:
    where_to_listen(cfg), which raises what it raises: InvalidConfig for an address beyond loopback without
    users, exit 78, and QueuectlError for one in use); `say(line)` prints a line for the operator (naming
    the host names the app `answers` to, if given), and `at_exit()` (if given) runs in the serving process
    as it stops."""
    from gunicorn.app.base import BaseApplication

    listen = listen or where_to_listen(cfg)
    origins = [WebConfig(host, port).origin for host, port in listen.addresses]
    where = ", ".join(f"http://{origin}{cfg.prefix}/" for origin in origins) + (" (from systemd)" if listen.passed else "")
    say(f"serving the dashboard on {where}" + (f" for host names {answers}" if answers else "") +
        f" ({'users of ' + cfg.users if cfg.users else 'no users: read-only, for whoever can reach it'})")

    class Dashboard(BaseApplication):
        def load_config(self):
            for key, value in {"bind": origins, "workers": 1, "worker_class": "gthread", "threads": THREADS,
                               "timeout": TIMEOUT, "graceful_timeout": GRACEFUL, "accesslog": "-",
                               "errorlog": "-", "proc_name": "queuectl-web", "forwarded_allow_ips": "127.0.0.1,::1",
                               "limit_request_line": 8190, "limit_request_fields": 100,
                               "worker_exit": lambda arbiter, worker: at_exit and at_exit(),
                               # A hangup (the terminal or SSH session closed) stops it, as it does any
                               # foreground command; gunicorn's own meaning, reload, has nothing to reload here.
                               "when_ready": lambda arbiter: setattr(arbiter, "handle_hup", arbiter.handle_term),
                               }.items():
                self.cfg.set(key, value)

        def load(self):
            return app

    Dashboard().run()
