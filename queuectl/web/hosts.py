"""The host names the dashboard answers to: every request must name one, in its `Host` (and, from a trusted
proxy, in its `X-Forwarded-Host`), or it is refused before anything else runs, pages and assets alike.

Why: DNS rebinding. A page the operator opens in a browser on this host (or on a laptop with an SSH tunnel
to it) can point its own name at 127.0.0.1 once loaded, and then read the dashboard as its own origin:
`Sec-Fetch-Site` says same-origin and `Origin` matches `Host`, so the checks that guard the actions say
nothing of reads, and job commands and output are where secrets end up. The browser still sends the
attacker's name in `Host`, which is what is checked here. The rule of Jupyter's local host check,
webpack-dev-server's allowedHosts, Django's ALLOWED_HOSTS and Grafana's enforce_domain.

The names answered (`Allowed`): the loopback names (LOOPBACK), the address the dashboard is bound to and the
bind's host name, the address a connection arrived at (so that a dashboard bound to 0.0.0.0 answers this
host's addresses typed as addresses; a name is never one, since a name is what rebinding controls), and
the names configured (--allow-host, [web] hosts), where a leading dot (`.example.org`) allows the domain
and its subdomains. Ports are not compared: the rule is on names, which rebinding controls, and an SSH
tunnel to another local port (`ssh -L 9000:127.0.0.1:8765`) must work.

Not werkzeug's host_is_trusted nor Flask's TRUSTED_HOSTS: Flask 2.2 (Debian 12) has no TRUSTED_HOSTS, and
werkzeug's rule is not the same in Debian 12's 2.2 and PyPI's 3.1, compares names with their case
("LOCALHOST" is not "localhost"), and in 3.1 matches no IPv6 address ("[::1]:80" is not "[::1]").
"""

from __future__ import annotations

import html
import ipaddress
import json
import re
import sys
import threading
from typing import Callable, Iterable, NamedTuple

from queuectl.domain.errors import InvalidInput
from queuectl.web.security import HEADERS

#: The names of this host's loopback interface, always answered.
LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
#: The addresses that name no interface but every one (a bind to all of them), canonical.
UNSPECIFIED = ("0.0.0.0", "[::]")
#: The refusal's status (RFC 9110 §15.5.20: the server will not answer for the target URI's authority).
STATUS = "421 Misdirected Request"
#: How many refused names the log names (one line each, the first time); the ones after are not named.
LOGGED = 100
#: A DNS name's label (RFC 1123 letters, digits and hyphens; underscores, as some hosts are named).
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
#: A request target in absolute form (scheme://authority...): its authority.
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
#: A Host header's value: a host (a bracketed IPv6 address or a name without colons) and an optional port.
_HOST_HEADER = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(?::([0-9]{0,5}))?")


def canonical(host: str) -> str | None:
    """Return the canonical form of a host without its port, or None if it is no host name nor address.

    Canonical: lower case, without one trailing dot; an IPv4 address as dotted decimal; an IPv6 address
    compressed, in brackets ("[::1]", as a URL and a Host header hold it; given with or without them).
    A name has DNS labels (at most 63 characters each, 253 in all), and its last label is no number
    (RFC 3696 §2): "127.1" is no name, and it is no address as written either."""
    text = host.strip().lower()
    if not text or not text.isascii():
        return None
    if ":" in text or text.startswith("["):
        inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
        try:
            return f"[{ipaddress.IPv6Address(inner).compressed}]"
        except ValueError:
            return None
    text = text[:-1] if text.endswith(".") else text
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        pass
    labels = text.split(".")
    if len(text) > 253 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return None
    return text


def host_of(header: str | None) -> str | None:
    """Return the canonical host of a `Host` header's value ("name", "name:8765", "[::1]:8765"), or None for
    none or a malformed one."""
    match = _HOST_HEADER.fullmatch((header or "").strip())
    if not match or not match.group(1) or int(match.group(2) or 0) > 65535:
        return None
    return canonical(match.group(1))


def parse_name(raw: str) -> str:
    """Return a configured name in canonical form: a DNS name (an internationalised one as IDNA, as browsers
    send it), `.domain` for the domain and its subdomains (two labels at least: `.com` would answer every
    name anyone can register), or an IP address. Raises InvalidInput for anything else: a port, a scheme, a
    path, a `*`."""
    text = str(raw).strip()
    domain = text.startswith(".") and not text.startswith("..")
    body = text[1:] if domain else text
    try:
        body = body.encode("idna").decode("ascii") if not body.isascii() else body
    except UnicodeError:
        body = ""
    name = canonical(body) if body else None
    if name is None or (domain and (ip_of(name.strip("[]")) is not None or "." not in name)):
        raise InvalidInput(f"a host name to answer is a DNS name (queue.example.org;"
                           f" .example.org for it and its subdomains, two labels at least) or an IP address,"
                           f" without scheme, port or '*', got {text!r}")
    return "." + name if domain else name


def parse_names(raw) -> tuple[str, ...]:
    """Return the canonical names of `raw`: names (a list or tuple, as repeated options give them) or one
    text of names separated by commas or white space (as [web] hosts = holds them; empty: none); raises
    InvalidInput for a bad one (parse_name), an empty one of a list included."""
    items = [item for item in re.split(r"[\s,]+", raw) if item] if isinstance(raw, str) else list(raw)
    return tuple(dict.fromkeys(parse_name(item) for item in items))


class Allowed(NamedTuple):
    """The host names the dashboard answers to: exact `names` and `domains` (each with its subdomains);
    `anywhere`: it is bound to every address (0.0.0.0 or ::), where the address a request arrived at is the
    one that says which of this host's addresses it answers to (arrived_at)."""

    names: frozenset[str]
    domains: tuple[str, ...]
    anywhere: bool = False

    @classmethod
    def served(cls, configured: Iterable[str] = (), addresses: Iterable[str] = ()) -> "Allowed":
        """Return the names of a dashboard bound to `addresses` (numeric, or the bind's host name as given)
        with the `configured` names (canonical, as parse_names gives them), and LOOPBACK's; an unspecified
        address (0.0.0.0, ::) names nothing."""
        names, domains, anywhere = set(LOOPBACK), [], False
        for address in addresses:
            name = canonical(address)
            anywhere = anywhere or name in UNSPECIFIED
            if name is not None and name not in UNSPECIFIED:
                names.add(name)
        for name in configured:
            if name.startswith("."):
                domains.append(name[1:])
            else:
                names.add(name)
        return cls(frozenset(names), tuple(dict.fromkeys(domains)), anywhere)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.names or any(
            name == domain or name.endswith("." + domain) for domain in self.domains))

    def listed(self) -> str:
        """The names, as the start-up line says them: loopback's first, then the others sorted."""
        rest = sorted(self.names - set(LOOPBACK)) + ["." + domain for domain in self.domains]
        listed = ", ".join([*LOOPBACK, *rest])
        return listed + (", and the address of this host a request arrives at" if self.anywhere else "")


def ip_of(address) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Return the IP address of `address` (a socket's, a peer's, a resolution's), an IPv4-mapped IPv6 one
    (::ffff:127.0.0.1: either side of a dual-stack socket's IPv4 connection) as its IPv4 address, which
    Python before 3.13 does not count as loopback; None for anything that is no address (a name)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return getattr(ip, "ipv4_mapped", None) or ip


def is_loopback(address: str) -> bool:
    """Return whether `address` is a loopback IP address (127.0.0.0/8, ::1; ip_of). A name is not: what it
    resolves to is (queuectl.web.serve.where_to_listen)."""
    ip = ip_of(address)
    return ip is not None and ip.is_loopback


def arrived_at(environ) -> str | None:
    """Return the canonical address the request's connection arrived at (the server's side), or None where
    the server does not say (gunicorn passes the connection as `gunicorn.socket`)."""
    sock = environ.get("gunicorn.socket")
    try:
        ip = ip_of(sock.getsockname()[0]) if sock is not None else None
    except (OSError, TypeError, IndexError):  # not an IP socket
        return None
    return canonical(str(ip)) if ip is not None else None


def from_proxy(environ) -> bool:
    """Whether the request comes from this host, where the trusted reverse proxy is (127.0.0.0/8, ::1): the
    one rule for trusting a proxy's headers (X-Forwarded-Host here, the user header in queuectl.web.app)."""
    return is_loopback(environ.get("REMOTE_ADDR") or "")


def forwarded_host(environ) -> str | None:
    """Return the trusted proxy's X-Forwarded-Host (its first value: the client's), or None where there is
    none or the request does not come from the proxy's side (from_proxy)."""
    value = environ.get("HTTP_X_FORWARDED_HOST")
    return value.split(",")[0].strip() if value and from_proxy(environ) else None


def asked_host(environ) -> str:
    """Return the host[:port] the client asked for, as its browser's origin holds it: the trusted proxy's
    X-Forwarded-Host, else Host ("" if neither)."""
    return forwarded_host(environ) or environ.get("HTTP_HOST") or ""


class Refused(NamedTuple):
    """Why a request is refused: the `header` that named the host, and the `name` (None: malformed or missing)."""

    header: str
    name: str | None

    def message(self) -> str:
        """The line the client gets: no more than what it sent, and nothing of the queue."""
        if self.name is None:
            return f"refused: the request's {self.header} names no host"
        return f"refused: this dashboard does not answer to the host name {self.name} (its log says how to allow one)"


def target_host(environ) -> str | None:
    """Return the host[:port] of a request target in absolute form (`GET http://name/path`, RFC 9112 §3.2.2,
    which a server must take over Host; gunicorn passes the target as RAW_URI), or None for the usual
    origin form (`GET /path`)."""
    match = _ABSOLUTE.match(environ.get("RAW_URI") or "")
    return match.group(1).rpartition("@")[2] if match else None


def refused(environ, allowed: Allowed) -> Refused | None:
    """Return why the request is refused (its Host, a request target's host, or a trusted proxy's
    X-Forwarded-Host, names no host of `allowed` nor the address its connection arrived at), or None if it
    may go on."""
    checked = [("Host", environ.get("HTTP_HOST"))]
    target = target_host(environ)
    if target is not None:
        checked.append(("target", target))
    forwarded = forwarded_host(environ)
    if forwarded is not None:
        checked.append(("X-Forwarded-Host", forwarded))
    for header, value in checked:
        name = host_of(value)
        # The connection's own address is asked of its socket only for a name not otherwise answered.
        if name is None or (name not in allowed and name != arrived_at(environ)):
            return Refused(header, name)
    return None


class HostCheck:
    """WSGI middleware: a request whose host is not `allowed` (see the module's docstring) gets STATUS and one
    line saying why, in HTML or JSON as the dashboard's other errors (`wants_json(environ)`), and nothing of
    `app`; `say(line)` names each refused host once (LOGGED names at most)."""

    def __init__(self, app, allowed: Allowed, wants_json: Callable[[dict], bool],
                 say: Callable[[str], None] | None = None):
        self.app, self.allowed, self.wants_json = app, allowed, wants_json
        self.say = say or (lambda line: print(f"queuectl web: {line}", file=sys.stderr, flush=True))
        self._named: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        refusal = refused(environ, self.allowed)
        if refusal is None:
            return self.app(environ, start_response)
        self._log(refusal)
        why = refusal.message()
        if self.wants_json(environ):
            body, kind = json.dumps({"error": why}).encode(), "application/json"
        else:
            body = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>421 Misdirected Request</title></head>\n"
                    f"<body><h1>421</h1><p id=\"error\">{html.escape(why)}</p></body></html>\n").encode()
            kind = "text/html; charset=utf-8"

        start_response(STATUS, [("Content-Type", kind), ("Content-Length", str(len(body))), *HEADERS.items()])
        return [body]

    def _log(self, refusal: Refused) -> None:
        name = refusal.name or f"(a {refusal.header} that names no host)"
        with self._lock:
            if name in self._named or len(self._named) > LOGGED:
                return
            self._named.add(name)
            count = len(self._named)
        if count > LOGGED:
            self.say(f"refusing requests for more host names; past the first {LOGGED}, they are not named")
        else:
            self.say(f"refusing requests for host {name}: it answers to {self.allowed.listed()}; --allow-host NAME"
                     " or [web] hosts = NAME adds one (said once a name)")
