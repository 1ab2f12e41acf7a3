"""The dashboard's users file: parsing it (errors name the line, never a hash), checking passwords (a success
remembered, everything else refused), changing it (queuectl.web.userfile: other lines kept, mode 0640) and
`queuectl web-user set/rm/list` through the CLI."""

from __future__ import annotations

import json
import os
import stat

import bcrypt
import pytest

from support.cli import Cli, assert_error
from queuectl.domain.errors import InvalidConfig, InvalidInput
from queuectl.web import userfile, users
from queuectl.web.users import CACHE_SECONDS, Checker, User
from support.inprocess import Clock

#: bcrypt hashes at the lowest cost (made once: bcrypt is slow on purpose).
HASH = bcrypt.hashpw(b"secret", bcrypt.gensalt(4))
OTHER = bcrypt.hashpw(b"other", bcrypt.gensalt(4))


def test_a_users_file_is_parsed():
    text = f"# users\n\nalice:operator:{HASH.decode()}\n  bob:viewer:{OTHER.decode()}  \nproxy:viewer:-\n"
    assert users.parse(text, "f") == {"alice": User("alice", "operator", HASH), "bob": User("bob", "viewer", OTHER),
                                      "proxy": User("proxy", "viewer", None)}


@pytest.mark.parametrize("line, said", [
    ("alice:operator", "not NAME:ROLE:HASH"),
    ("alice:operator:{hash}:x", "not NAME:ROLE:HASH"),
    ("al ice:operator:{hash}", "a user name is 1 to 64 letters"),
    ("alice:admin:{hash}", "a role is viewer or operator, got 'admin'"),
    ("alice:operator:{hash}x", "the password is not a bcrypt hash ($2b$...) nor '-'"),
    ("alice:operator:secret", "the password is not a bcrypt hash"),
    ("alice:viewer:-\nalice:operator:{hash}", "user alice is named twice"),
])
def test_a_parse_error_names_the_file_and_line_and_never_a_hash(line, said):
    text = f"# users\nbob:viewer:{OTHER.decode()}\n" + line.format(hash=HASH.decode())
    with pytest.raises(InvalidConfig) as e:
        users.parse(text, "/etc/queuectl/web-users")
    number = 2 + len(line.split("\n"))
    assert str(e.value).startswith(f"/etc/queuectl/web-users: line {number}: {said}")
    assert HASH.decode() not in str(e.value) and OTHER.decode() not in str(e.value) and "secret" not in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unreadable_users_file(tmp_path):
    with pytest.raises(InvalidConfig, match=f"cannot read the users file {tmp_path / 'none'}: No such file"):
        users.load(str(tmp_path / "none"))
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidConfig, match="cannot read the users file"):
        users.load(str(tmp_path / "binary"))


@pytest.fixture
def checks(monkeypatch):
    """The number of bcrypt checks made so far (a list: its length)."""
    made = []
    real = bcrypt.checkpw

    def counted(password, hashed):
        made.append(password)
        try:
            return real(password, hashed)
        except ValueError as e:  # a hash bcrypt refuses: no real check (the checker would catch a ValueError)
            raise AssertionError(f"bcrypt refused the hash {hashed!r}: {e}") from None
    monkeypatch.setattr(bcrypt, "checkpw", counted)
    return made


def test_the_checker_remembers_a_success_for_a_while(checks):
    clock = Clock()
    checker = Checker({"alice": User("alice", "operator", HASH)}, clock=clock)
    assert checker.check("alice", "secret") == User("alice", "operator", HASH)
    assert len(checks) == 1
    clock.now += CACHE_SECONDS - 1
    assert checker.check("alice", "secret").name == "alice" and len(checks) == 1  # remembered
    clock.now += 2
    assert checker.check("alice", "secret").name == "alice" and len(checks) == 2  # checked again


def test_the_checker_refuses_the_rest(checks):
    checker = Checker({"alice": User("alice", "operator", HASH), "proxy": User("proxy", "viewer", None)},
                      clock=Clock())
    assert checker.check("alice", "wrong") is None
    assert checker.check("alice", "wrong") is None and len(checks) == 2  # a failure is never remembered
    assert checker.check("mallory", "secret") is None and len(checks) == 3  # checked against the decoy all the same
    assert checker.check("proxy", "") is None and checker.check("proxy", "-") is None  # signs in by header alone
    assert checker.check("alice", "") is None and checker.check("alice", "s" * 73) is None
    assert checker.check("alice", "secret") is not None  # and the right password still works


def test_an_unknown_name_costs_a_real_check_at_the_users_cost():
    """A wrong name takes as long as a wrong password: the decoy is a hash bcrypt accepts (bcrypt 4 and later
    refuse a malformed one at once), at the highest cost of the users' hashes."""
    costly = bcrypt.hashpw(b"x", bcrypt.gensalt(5))
    decoy = users.decoy([User("alice", "operator", HASH), User("bob", "viewer", costly), User("proxy", "viewer", None)])
    assert decoy.startswith(b"$2b$05$") and bcrypt.checkpw(b"secret", decoy) is False
    assert users.decoy([User("proxy", "viewer", None)]) is None  # no password to check: no name to tell apart


def test_hash_password():
    hashed = users.hash_password("pässword")
    assert hashed.startswith("$2b$12$") and bcrypt.checkpw("pässword".encode(), hashed.encode())
    for bad in ("", "x" * 73, "é" * 37):
        with pytest.raises(InvalidInput, match="a password is 1 to 72 bytes"):
            users.hash_password(bad)


def test_userfile_put_makes_the_file_0640_and_keeps_every_other_line(tmp_path):
    path = str(tmp_path / "web-users")
    assert userfile.put(path, User("alice", "viewer", HASH)) is False
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    with open(path, "a") as f:
        f.write("\n# the operators\nbob:operator:-\n")
    assert userfile.put(path, User("alice", "operator", OTHER)) is True
    assert open(path).read() == f"alice:operator:{OTHER.decode()}\n\n# the operators\nbob:operator:-\n"
    assert userfile.put(path, User("carol", "viewer", None)) is False
    assert open(path).read().endswith("bob:operator:-\ncarol:viewer:-\n")
    assert userfile.remove(path, "alice") is True
    assert open(path).read() == "\n# the operators\nbob:operator:-\ncarol:viewer:-\n"
    assert userfile.remove(path, "alice") is False
    assert [name for name in os.listdir(tmp_path)] == ["web-users"]  # no temporary file left


def test_userfile_keeps_a_file_s_own_mode_and_never_rewrites_a_malformed_one(tmp_path):
    path = tmp_path / "web-users"
    path.write_text("bob:operator:-\n")
    os.chmod(path, 0o600)
    userfile.put(str(path), User("alice", "viewer", HASH))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    path.write_text("bob:operator\n")
    with pytest.raises(InvalidConfig, match="line 1: not NAME:ROLE:HASH"):
        userfile.put(str(path), User("alice", "viewer", HASH))
    with pytest.raises(InvalidConfig, match="line 1"):
        userfile.remove(str(path), "bob")
    assert path.read_text() == "bob:operator\n"


@pytest.fixture
def cli() -> Cli:
    return Cli(None)


def test_web_user_set_list_rm(cli, tmp_path):
    path = str(tmp_path / "web-users")
    r = cli("web-user", "set", "alice", "--role", "operator", "--password-stdin", "--file", path, input="pw one\n")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", f"added user alice (operator) in {path}\n")
    r = cli("web-user", "set", "bob", "--password-stdin", "--file", path, input="pw two\n")
    assert r.stderr == f"added user bob (viewer) in {path}\n"
    r = cli("web-user", "set", "bob", "--role", "operator", "--password-stdin", "--file", path, input="pw 3\n")
    assert r.stderr == f"changed user bob (operator) in {path}\n"
    loaded = users.load(path)
    assert bcrypt.checkpw(b"pw one", loaded["alice"].hash) and bcrypt.checkpw(b"pw 3", loaded["bob"].hash)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    r = cli("web-user", "list", "--file", path)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "alice\toperator\nbob\toperator\n", "")
    r = cli("web-user", "ls", "--file", path, "--json")
    assert json.loads(r.stdout) == [{"name": "alice", "role": "operator", "password": True},
                                    {"name": "bob", "role": "operator", "password": True}] and "$2" not in r.stdout
    r = cli("web-user", "rm", "alice", "--file", path)
    assert (r.exit_code, r.stderr) == (0, f"removed user alice from {path}\n")
    assert_error(cli("web-user", "rm", "alice", "--file", path), 1, f"no user alice in {path}")
    assert list(users.load(path)) == ["bob"]


def test_web_user_refuses_bad_input_and_changes_nothing(cli, tmp_path):
    path = tmp_path / "web-users"
    cli("web-user", "set", "bob", "--password-stdin", "--file", str(path), input="pw\n")
    before = path.read_text()
    assert_error(cli("web-user", "set", "b b", "--password-stdin", "--file", str(path), input="pw\n"), 2,
                 "a user name is 1 to 64")
    assert_error(cli("web-user", "set", "carol", "--password-stdin", "--file", str(path), input="\n"), 2,
                 "a password is 1 to 72 bytes")
    r = cli("web-user", "set", "carol", "--role", "admin", "--password-stdin", "--file", str(path), input="pw\n")
    assert r.exit_code == 2 and "admin" in r.stderr
    r = cli("web-user", "set", "carol", "--file", str(path), input="one\ntwo\n")  # asked twice, on stderr
    assert (r.exit_code, r.stdout.strip()) == (2, "")  # Click 8.1 (Debian 12) ends a hidden prompt's line on stdout
    # after the prompts (Click 8.1 ends them with no newline where stdin is no terminal): the one line
    assert r.stderr.endswith("queuectl: error: the two passwords differ: nothing changed\n")
    assert path.read_text() == before
    r = cli("web-user", "set", "carol", "--file", str(path), input="same\nsame\n")
    assert r.exit_code == 0 and bcrypt.checkpw(b"same", users.load(str(path))["carol"].hash)
    path.write_text(before + "broken line\n")
    line = assert_error(cli("web-user", "list", "--file", str(path)), 78, f"{path}: line 2: not NAME:ROLE:HASH")
    assert before.split(":")[2].strip() not in line
    assert_error(cli("web-user", "list", "--file", str(tmp_path / "none")), 78, "cannot read the users file")
