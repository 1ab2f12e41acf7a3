"""The dashboard's users file: who may sign in, with which role, and their bcrypt-hashed passwords.

One user per line, `NAME:ROLE:HASH` (blank lines and lines beginning with # are skipped), as
`queuectl web-user set` writes it; the hash is bcrypt's ($2b$, from Debian's python3-bcrypt or
`htpasswd -nB`), or `-` for a user who signs in only through the trusted reverse proxy's header.
Roles (ROLES): a viewer reads; an operator also acts (retry, cancel, pause, resume). In the spirit of
Prometheus's web configuration file, whose passwords are bcrypt hashes too.

bcrypt is slow on purpose (about 0.2 s a check at cost 12), and a browser sends the password with
every request: a check that succeeded is remembered for CACHE_SECONDS under an HMAC of the name,
password and hash with a key made at start (never the password itself), as Prometheus does.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import threading
import time
from typing import NamedTuple

from queuectl.domain.errors import InvalidConfig, InvalidInput

ROLES = ("viewer", "operator")
#: Seconds a successful password check is remembered, and how many are remembered at most.
CACHE_SECONDS, CACHE_SIZE = 300.0, 1024
#: bcrypt's work factor for new hashes (2^12 rounds).
COST = 12
_NAME = re.compile(r"[A-Za-z0-9._@+-]{1,64}")


class User(NamedTuple):
    """A user of the dashboard: `name`, `role` (one of ROLES) and bcrypt `hash` (None: only the proxy's header)."""

    name: str
    role: str
    hash: bytes | None


def check_name(name: str) -> str:
    """Return `name` if it may name a user (1 to 64 of letters, digits and ._@+-); raises InvalidInput."""
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"a user name is 1 to 64 letters, digits or ._@+- characters, got {name!r}")
    return name


def check_role(role: str) -> str:
    """Return `role` if it is one of ROLES; raises InvalidInput."""
    if role not in ROLES:
        raise InvalidInput(f"a role is {' or '.join(ROLES)}, got {role!r}")
    return role


def parse(text: str, where: str) -> dict[str, User]:
    """Return {name: User} of a users file's `text`; raises InvalidConfig naming `where` and the line (never
    printing a hash)."""
    users: dict[str, User] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(":")
        try:
            if len(parts) != 3:
                raise InvalidInput("not NAME:ROLE:HASH")
            name, role, hashed = check_name(parts[0]), check_role(parts[1]), parts[2]
            if hashed != "-" and not re.fullmatch(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}", hashed):
                raise InvalidInput("the password is not a bcrypt hash ($2b$...) nor '-'")
            if name in users:
                raise InvalidInput(f"user {name} is named twice")
        except InvalidInput as e:
            raise InvalidConfig(f"{where}: line {number}: {e}") from None
        users[name] = User(name, role, None if hashed == "-" else hashed.encode())
    return users


def load(path: str) -> dict[str, User]:
    """Return the users of the file at `path`; raises InvalidConfig if it cannot be read or is malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read(), path)
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidConfig(f"cannot read the users file {path}: {getattr(e, 'strerror', None) or e}") from None


def hash_password(password: str) -> str:
    """Return bcrypt's hash of `password` ($2b$, cost COST); raises InvalidInput for an empty one, or one
    over bcrypt's 72 bytes (which it would cut silently)."""
    import bcrypt

    raw = password.encode()
    if not raw or len(raw) > 72:
        raise InvalidInput("a password is 1 to 72 bytes (bcrypt reads no more)")
    return bcrypt.hashpw(raw, bcrypt.gensalt(COST)).decode()


def decoy(users) -> bytes | None:
    """Return a hash of a random password at the highest cost of `users`' hashes (None if none has a password:
    no name to tell apart), to check unknown names against, so that a wrong name takes as long as a wrong
    password. A real hash: bcrypt 4 and later refuse a malformed one at once (ValueError), which would tell
    names apart by time."""
    costs = [int(u.hash[4:6]) for u in users if u.hash is not None]
    if not costs:
        return None
    import bcrypt

    return bcrypt.hashpw(os.urandom(16).hex().encode(), bcrypt.gensalt(max(costs)))  # no NUL: bcrypt 3.2 refuses one


class Checker:
    """Checks passwords against `users`, remembering successes (see the module's docstring); thread-safe."""

    def __init__(self, users: dict[str, User], clock=time.monotonic):
        self.users = users
        self._clock = clock
        self._key = os.urandom(32)
        self._known: dict[bytes, float] = {}
        self._lock = threading.Lock()
        self._decoy = decoy(users.values())

    def check(self, name: str, password: str) -> User | None:
        """Return the user `name` if `password` is theirs, else None."""
        import bcrypt

        user = self.users.get(name)
        hashed = user.hash if user is not None and user.hash is not None else self._decoy
        if hashed is None:
            return None
        raw = password.encode()
        token = hmac.new(self._key, b"\0".join((name.encode(), raw, hashed)), hashlib.sha256).digest()
        now = self._clock()
        with self._lock:
            if self._known.get(token, 0.0) > now:
                return user
        try:
            ok = 0 < len(raw) <= 72 and bcrypt.checkpw(raw, hashed)
        except ValueError:
            ok = False
        if not ok or user is None or user.hash is None:
            return None
        with self._lock:
            if len(self._known) >= CACHE_SIZE:
                self._known = {k: t for k, t in self._known.items() if t > now}
                if len(self._known) >= CACHE_SIZE:
                    self._known.clear()
            self._known[token] = now + CACHE_SECONDS
        return user
