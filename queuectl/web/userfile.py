"""Changing the dashboard's users file (queuectl.web.users reads it): a user's line put or removed, the
other lines (comments included) kept as they were, the file replaced atomically with mode 0640."""

from __future__ import annotations

import os
import tempfile

from queuectl.domain.errors import InvalidConfig
from queuectl.web.users import User, parse

#: The mode of a users file this module writes: its hashes are for the dashboard's eyes only.
MODE = 0o640


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidConfig(f"cannot read the users file {path}: {getattr(e, 'strerror', None) or e}") from None
    parse(text, path)  # a malformed file is not rewritten
    return text.splitlines()


def _name(line: str) -> str | None:
    line = line.strip()
    return None if not line or line.startswith("#") else line.split(":", 1)[0]


def _write(path: str, lines: list[str]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = MODE
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".web-users.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            try:
                st = os.stat(path)
                os.chown(tmp, st.st_uid, st.st_gid)
            except FileNotFoundError:
                pass
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        raise InvalidConfig(f"cannot write the users file {path}: {e.strerror}") from None


def put(path: str, user: User) -> bool:
    """Put `user`'s line in the file at `path` (made if missing); return whether it replaced one.
    Raises InvalidConfig if the file is malformed or cannot be written."""
    lines = _lines(path)
    line = f"{user.name}:{user.role}:{user.hash.decode() if user.hash else '-'}"
    found = [i for i, text in enumerate(lines) if _name(text) == user.name]
    if found:
        lines[found[0]] = line
    else:
        lines.append(line)
    _write(path, lines)
    return bool(found)


def remove(path: str, name: str) -> bool:
    """Remove user `name`'s line from the file at `path`; return whether there was one."""
    lines = _lines(path)
    kept = [text for text in lines if _name(text) != name]
    if len(kept) == len(lines):
        return False
    _write(path, kept)
    return True
