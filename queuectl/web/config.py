"""`queuectl web`'s configuration: where it listens, under which URL prefix, and who may do what.

Each value comes from `queuectl web`'s option, else the site configuration file's [web] section
(queuectl.api.conffile: KEY = VALUE, the keys of KEYS), else the default. Under systemd's socket
activation the socket unit's ListenStream= decides where it listens, and `bind` is not used.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Mapping, NamedTuple

from queuectl.domain.errors import InvalidConfig, InvalidInput
from queuectl.web.hosts import is_loopback, parse_names
from queuectl.domain.settings import parse_duration

DEFAULT_BIND = "127.0.0.1:8765"
#: Seconds between two readings of the queue that every open page shares (the pages refresh as often).
DEFAULT_INTERVAL, INTERVAL_RANGE = 3.0, (1.0, 60.0)
#: A URL prefix: absolute, segments of unreserved characters (RFC 3986), no trailing slash.
_PREFIX = re.compile(r"(/[A-Za-z0-9._~-]+)+")
#: An HTTP header's name (RFC 9110 token characters).
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


class WebConfig(NamedTuple):
    """Where the dashboard listens (`host`, `port`), its URL `prefix` ("" or "/a/b"), the users file
    (`users`: a path, or None: nobody signs in and everyone on this host may look), the trusted reverse
    proxy's user header (`user_header`, or None), `read_only` (no one may act, whatever their role),
    `interval` (seconds between the shared readings of the queue) and `hosts` (the host names it answers to
    besides loopback's and its address's, canonical: queuectl.web.hosts)."""

    host: str = "127.0.0.1"
    port: int = 8765
    prefix: str = ""
    users: str | None = None
    user_header: str | None = None
    read_only: bool = False
    interval: float = DEFAULT_INTERVAL
    hosts: tuple[str, ...] = ()

    @property
    def origin(self) -> str:
        """The address as a URL's host and port ("127.0.0.1:8765", "[::1]:8765")."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_bind(text: str) -> tuple[str, int]:
    """Return (host, port) of "HOST:PORT" ("[::1]:8765" for IPv6); raises InvalidInput."""
    match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^:\[\]\s]+):(\d{1,5})", text.strip())
    if not match:
        raise InvalidInput(f"a bind address is HOST:PORT (or [IPv6]:PORT), got {text!r}")
    host, port = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    if not 1 <= int(port) <= 65535:
        raise InvalidInput(f"a port is 1 to 65535, got {port}")
    return host, int(port)


def parse_prefix(text: str) -> str:
    """Return the URL prefix of `text` without its trailing slash ("" for none or "/"); raises InvalidInput."""
    prefix = text.strip().rstrip("/")
    if prefix and (not _PREFIX.fullmatch(prefix) or any(part in (".", "..") for part in prefix.split("/"))):
        raise InvalidInput(f"a URL prefix is a path such as /queuectl (letters, digits and -._~ between"
                           f" slashes), got {text!r}")
    return prefix


def parse_header(raw) -> str:
    """Return the HTTP header name `raw` (RFC 9110 token characters); raises InvalidInput."""
    if not _HEADER.fullmatch(str(raw)):
        raise InvalidInput(f"not an HTTP header name: {raw!r}")
    return str(raw)


def parse_yes_no(raw) -> bool:
    """Return True or False of a flag (a bool) or a word (yes/no, true/false, on/off, 1/0); raises InvalidInput."""
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() not in ("yes", "no", "true", "false", "on", "off", "1", "0"):
        raise InvalidInput(f"yes or no, got {raw!r}")
    return str(raw).lower() in ("yes", "true", "on", "1")


def parse_interval(raw) -> float:
    """Return the seconds of `raw` (a number, or a duration: 5, 5s, 1m) within INTERVAL_RANGE; raises InvalidInput."""
    seconds = float(raw) if isinstance(raw, (int, float)) else _seconds(str(raw))
    low, high = INTERVAL_RANGE
    if seconds is None or not math.isfinite(seconds) or not low <= seconds <= high:
        raise InvalidInput(f"an interval is {low:g} to {high:g} seconds, got {raw!r}")
    return seconds


class Option(NamedTuple):
    """One setting: its `key` in the [web] section (the option is --KEY, its parameter KEY with "_", unless
    `option` names another: --allow-host for hosts), the WebConfig `fields` its value fills (two for a pair:
    bind's host and port), its `parse` (the raw value to the value; raises InvalidInput) and its `default`
    (already parsed)."""

    key: str
    fields: tuple[str, ...]
    parse: Callable[[object], object]
    default: object
    option: str | None = None

    @property
    def param(self) -> str:
        """The command's parameter of the option (allow_host for --allow-host)."""
        return (self.option or self.key).replace("-", "_")


#: The settings, each the [web] key and the option of the same name (docs/web.md's table says them).
OPTIONS = (
    Option("bind", ("host", "port"), lambda raw: parse_bind(str(raw)), parse_bind(DEFAULT_BIND)),  # where to listen
    Option("url-prefix", ("prefix",), lambda raw: parse_prefix(str(raw)), ""),
    Option("users", ("users",), lambda raw: str(raw) or None, None),  # the users file
    Option("user-header", ("user_header",), parse_header, None),  # the trusted reverse proxy's user header
    Option("read-only", ("read_only",), parse_yes_no, False),  # no actions for anyone
    Option("interval", ("interval",), parse_interval, DEFAULT_INTERVAL),  # seconds between shared readings
    Option("hosts", ("hosts",), parse_names, (), "allow-host"),  # host names answered (repeated, or a list)
)
#: The [web] keys of the site configuration file, each the option of the same name.
KEYS = tuple(option.key for option in OPTIONS)


def load(options: Mapping[str, object], site: Mapping[str, str], where: str = "the site configuration") -> WebConfig:
    """Return the configuration of `options` (the command's, None where not given) over `site` (the [web]
    section, KEY = VALUE), else each OPTIONS default. Raises InvalidInput for a bad option and InvalidConfig
    for a bad [web] value, also one an option overrides (the file is the service's, which gives no options),
    or an unknown key there (`where` names the file)."""
    unknown = sorted(set(site) - set(KEYS))
    if unknown:
        raise InvalidConfig(f"{where}: unknown [web] {', '.join(unknown)}; the keys are {', '.join(KEYS)}")
    fields = {}
    for option in OPTIONS:
        value = option.default
        if option.key in site:
            try:
                value = option.parse(site[option.key])
            except InvalidInput as e:
                raise InvalidConfig(f"{where}: [web] {option.key}: {e}") from None
        given = options.get(option.param)
        if given is not None and given != ():  # () : a repeatable option given no time
            try:
                value = option.parse(given)
            except InvalidInput as e:
                raise InvalidInput(f"--{option.option or option.key}: {e}") from None
        fields.update(zip(option.fields, value) if len(option.fields) > 1 else [(option.fields[0], value)])
    return WebConfig(**fields)


def _seconds(text: str) -> float:
    return parse_duration(text, "an interval", forever=False)


def check_exposure(address: str, users: str | None, name: str | None = None) -> None:
    """Refuse to serve beyond this host without users: raises InvalidConfig unless `address` (an IP address:
    where a socket is bound, or what the bind's host `name` resolved to) is a loopback one or a users file is
    configured (the rule of Faktory and Mission Control: closed by default)."""
    if users is None and not is_loopback(address):
        where = address if name in (None, address) else f"{name} ({address})"
        raise InvalidConfig(f"refusing to listen on {where} without users: anyone who can reach it could read the"
                            " queue; configure a users file (--users FILE, see 'queuectl web-user') or listen on"
                            " 127.0.0.1")
