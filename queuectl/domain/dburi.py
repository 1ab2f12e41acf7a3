"""What names a PostgreSQL database rather than a SQLite file, and keeping its password out of messages.

No imports beyond the standard library, and no regular expression compiled at import: the CLI's
start-up reads this module.
"""

import json
import re
from urllib.parse import unquote


class _Lazy:
    """A regular expression compiled on its first use, not at import: the CLI's start-up reads this module
    and most commands use none of these (re's own cache then keeps it)."""

    def __init__(self, pattern: str):
        self.pattern = pattern

    def __getattr__(self, name: str):
        return getattr(re.compile(self.pattern), name)


#: URI schemes libpq accepts; anything else given as a database is a SQLite path.
SCHEMES = ("postgresql://", "postgres://")

#: Meant for PostgreSQL but not a URI queuectl takes: a mistyped scheme, or libpq's keyword form.
_NEAR_URI = _Lazy(r"(?i)^\s*postgres\w*:|^\s*(host|hostaddr|dbname|user|port|service)\s*=")

#: What a message shows in place of a password.
MASK = "***"

#: libpq connection parameters whose values are not secret (libpq 15 to 18). The value of any other
#: key (password, sslpassword, scram_client_key, a misspelled or unknown key) counts as a password.
PUBLIC_KEYS = frozenset({
    "application_name", "channel_binding", "client_encoding", "connect_timeout", "dbname",
    "fallback_application_name", "gssdelegation", "gssencmode", "gsslib", "host", "hostaddr", "keepalives",
    "keepalives_count", "keepalives_idle", "keepalives_interval", "krbsrvname", "load_balance_hosts",
    "max_protocol_version", "min_protocol_version", "oauth_client_id", "oauth_issuer", "oauth_scope", "options",
    "passfile", "port", "replication", "require_auth", "requirepeer", "service", "servicefile",
    "ssl_max_protocol_version", "ssl_min_protocol_version", "sslcert", "sslcertmode", "sslcompression", "sslcrl",
    "sslcrldir", "sslkey", "sslkeylogfile", "sslmode", "sslnegotiation", "sslrootcert", "sslsni",
    "target_session_attrs", "tcp_user_timeout", "user",
})

#: The scheme-like start of a target ("postgresql://", "postgres:/", "POSTGRESQL://"), skipped before the user part.
_SCHEME = _Lazy(r"(?i)^\s*(?:[a-z][a-z0-9+.-]*:/+|postgres\w*:)")
#: What follows a host's ':' when it is a port (and maybe more hosts): host:5432, host:5432,host2:5433.
_PORTS = _Lazy(r"[0-9]+(,[^@]*)?")
#: One `key=value` parameter: in a URI's query (after ? or &) or in libpq's keyword form (after white space).
_PARAM = _Lazy(r"(?:^|(?<=[?&\s]))(?=([^?&=\s]*)=([^&]*))")  # a lookahead: parameters inside values count too
#: What libpq quotes in a message about a URI it cannot parse: the URI, a part of it, a key or a character.
_QUOTED = _Lazy(r'(?:\s*:)?\s*"([^"]*)"')
_KEY_LIKE = _Lazy(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def is_uri(target: str) -> bool:
    """Return True if `target` names a PostgreSQL database (a postgresql:// or postgres:// URI)."""
    return target.startswith(SCHEMES)


def near_miss(target: str) -> str | None:
    """Say why `target` looks meant for PostgreSQL without being a URI queuectl takes; None if it does not.

    Such a value would otherwise be taken for a SQLite path and silently make a file of that name.
    The message never repeats more of `target` than its scheme (it may hold a password).
    """
    if is_uri(target) or not _NEAR_URI.match(target):
        return None
    if "=" in target.split(":", 1)[0]:
        return ("a libpq keyword string (host=... dbname=...) is not taken as a database:"
                " write it as a URI, postgresql://user@host/dbname")
    scheme = target.strip().split(":", 1)[0]
    return (f"{scheme}: is not a URI queuectl takes: a PostgreSQL database is postgresql://user@host/dbname"
            " (lower case, two slashes); a SQLite path must not start like this")


def _written_secrets(target: str) -> set[str]:
    """The texts of `target` that may be a password, as written (see `secrets`)."""
    found: set[str] = set()
    rest = _SCHEME.sub("", target, count=1)
    colon, slash = rest.find(":"), rest.find("/")
    if colon >= 0 and (slash < 0 or colon < slash):
        # An '@' after the first '/' ends a password with a raw '/' in it, unless a port comes first
        # (host:5432/db?user=a@corp, host:5432,host2/db).
        end = slash if slash >= 0 and _PORTS.fullmatch(rest[colon + 1:slash]) else len(rest)
        for at in (i for i, ch in enumerate(rest[:end]) if ch == "@" and i > colon):
            written = rest[colon + 1:at]
            found.add(written)
            port = written.split("/", 1)[0]  # what libpq reads as the port when the password has a raw '/'
            if not re.fullmatch(r"[0-9]+", port):  # (a real port, before a path with an '@', is no password)
                found.add(port)
    for match in _PARAM.finditer(target):
        key, value = unquote(match.group(1), errors="replace"), match.group(2)
        if key not in PUBLIC_KEYS:
            found.update((value, value.split("?", 1)[0], value.split(None, 1)[0] if value.strip() else value))
    query = target.partition("?")[2]
    found.update(piece for piece in re.split(r"[?&]", query) if "=" not in piece)  # `?secret`: no key at all
    return found


def _forms(secret: str) -> set[str]:
    """`secret` as a message may show it: as written, percent-decoded, and escaped by repr, ascii, JSON or libpq."""
    plain = {secret, unquote(secret, errors="replace"), unquote(secret, errors="backslashreplace")}
    escaped = set()
    for text in plain:
        for show in (repr, ascii):  # in a longer text that holds both quotes, repr escapes ' too: char by char
            escaped.update((show(text)[1:-1], "".join(show(ch + '"')[1:-2] for ch in text)))
        escaped.add(json.dumps(text)[1:-1])
        escaped.add(json.dumps(text, ensure_ascii=False)[1:-1])
        escaped.add(text.replace("\\", "\\\\").replace("'", "\\'"))  # libpq's keyword form, psycopg's make_conninfo
    return plain | escaped


def secrets(target: str) -> set[str]:
    """Return every text that may be a password in `target` (a URI, a near miss or a keyword string).

    Generous on purpose: a URI may be malformed, and each reading libpq or the user may have
    meant counts. The candidates are
    - the user part's password: from the first ':' after the scheme (when no '/' comes before it)
      to each '@' after it (libpq takes the first '@', a user with a raw '@' in the password meant a
      later one; an '@' after the first '/' only when no port number comes between, as the user of
      a password with a raw '/' meant it), and that text up to a raw '/' (which libpq then reads as
      the port) unless it is a port number;
    - the value of every `key=value` parameter (after '?', '&' or white space; the key percent-decoded)
      whose key is not in PUBLIC_KEYS: password, sslpassword, a misspelled or unknown key; the value
      runs to the next '&', and is also taken up to a '?' and up to white space;
    - a query parameter without '=' (a password written without its key);
    each as written, percent-decoded (bytes that are not UTF-8 as U+FFFD, or as \\xNN) and as repr,
    ascii, JSON and libpq's keyword form escape it, and each of its pieces between commas longer than
    one character. Never the empty string.
    """
    found = {form for secret in _written_secrets(target) if secret for form in _forms(secret) if form}
    # libpq splits the host and port it reads a user part's password as at each ',' (a list of hosts, some
    # of them encoded as %2C): a URI rebuilt from its parse shows the pieces apart. Pieces of one character
    # are left: masking every such character of a message would hide it and reveal nothing.
    return found | {piece for form in found for piece in form.split(",") if len(piece) > 1}


def redact(text: str, target: str) -> str:
    """Return `text` with every candidate password of `target` (see `secrets`) replaced by MASK.

    Every occurrence of every candidate is found in `text` as given, and each run of characters
    that any of them covers becomes one MASK: candidates that overlap leave no part behind.
    """
    covered = bytearray(len(text))
    for secret in secrets(target):
        start = text.find(secret)
        while start >= 0:
            covered[start:start + len(secret)] = b"\1" * len(secret)
            start = text.find(secret, start + 1)
    out, pos = [], 0
    while (start := covered.find(1, pos)) >= 0:
        end = covered.find(0, start)
        end = len(text) if end < 0 else end
        out += [text[pos:start], MASK]
        pos = end
    return "".join(out) + text[pos:]


def uri_error(message: str, target: str) -> str:
    """Return libpq's message about a URI it refused (cannot parse, or a bad value) without quoting the URI.

    libpq quotes the whole URI, or one of its parts, in double quotes. The result keeps a quoted
    text only if it is one character (`unexpected character "x"`) or shaped like a parameter name
    (`invalid URI query parameter: "sslmod"`) and no candidate password; any other quoted text is
    left out with the ': ' before it (`invalid percent-encoded token`), and candidate passwords are
    masked as well (see `redact`). When `target` holds a '"' itself, the quotes cannot be paired
    reliably: the message then ends before the first quoted text longer than one character.
    """
    message = redact(message, target)
    hidden = secrets(target)
    ambiguous = '"' in target
    out, pos = [], 0
    for match in _QUOTED.finditer(message):
        quoted = match.group(1)
        keep = len(quoted) <= 1 or (not ambiguous and _KEY_LIKE.fullmatch(quoted) and quoted not in hidden)
        out.append(message[pos:match.start() if not keep else match.end()])
        pos = match.end()
        if not keep and ambiguous:
            break
    else:
        rest = message[pos:]
        out.append(rest.split('"', 1)[0])  # an unpaired quote: what follows it may be the URI
    return "".join(out).rstrip(" :;") or "it cannot be parsed"
