"""`queuectl web-user`: the dashboard's users file (queuectl.web.users, userfile); this module only parses,
checks and reports."""

from __future__ import annotations

import json
import sys

import click

from queuectl.cli.common import HelpGroup, json_option
from queuectl.domain.errors import InvalidInput, NotFound
from queuectl.web import need_libraries, userfile, users


@click.group(cls=HelpGroup, name="web-user")
def web_user():
    """Manage the dashboard's users file: NAME:ROLE:BCRYPT-HASH lines (roles: viewer, operator).

    \b
    Example:
      queuectl web-user set alice --role operator
    """


_file = click.option("--file", "path", metavar="FILE", default="/etc/queuectl/web-users", show_default=True,
                     help="The users file.")


@web_user.command("set")
@click.argument("name")
@click.option("--role", type=click.Choice(["viewer", "operator"]), default="viewer", show_default=True)
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin's first line, not a prompt.")
@_file
def set_user(name, role, password_stdin, path):
    """Add user NAME, or change their role and password (asked for twice, or read from stdin).

    \b
    Example:
      queuectl web-user set alice --role operator --file /etc/queuectl/web-users
    """
    need_libraries()
    users.check_name(name)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, err=True)
        if click.prompt("Repeat for confirmation", hide_input=True, err=True) != password:
            raise InvalidInput("the two passwords differ: nothing changed")
    changed = userfile.put(path, users.User(name, role, users.hash_password(password).encode()))
    click.echo(f"{'changed' if changed else 'added'} user {name} ({role}) in {path}", err=True)


@web_user.command("rm")
@click.argument("name")
@_file
def remove_user(name, path):
    """Remove user NAME; exits 1 if there is none.

    \b
    Example:
      queuectl web-user rm alice
    """
    if not userfile.remove(path, name):
        raise NotFound(f"no user {name} in {path}")
    click.echo(f"removed user {name} from {path}", err=True)


@web_user.command("list")
@_file
@json_option
def list_users(path, as_json):
    """List the users and their roles (never their hashes).

    \b
    Example:
      queuectl web-user list --file /etc/queuectl/web-users
    """
    listed = users.load(path).values()
    if as_json:
        click.echo(json.dumps([{"name": u.name, "role": u.role, "password": u.hash is not None} for u in listed]))
        return
    for user in listed:
        click.echo(f"{user.name}\t{user.role}" + ("" if user.hash else "\t(header only)"))
