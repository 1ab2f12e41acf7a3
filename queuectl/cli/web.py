"""`queuectl web` (the dashboard, queuectl.web) and `queuectl web-user` (its users file); this module only
parses, checks and reports."""

from __future__ import annotations

import click

from queuectl.cli.common import HelpGroup, json_option, pass_app
from queuectl.domain.errors import InvalidConfig, InvalidInput, NotFound
from queuectl.api.database import Database


@click.command()
@click.option("--bind", metavar="HOST:PORT", help="Where to listen [default: 127.0.0.1:8765]. An address beyond"
              " loopback needs users (--users).")
@click.option("--url-prefix", metavar="/PATH", help="Serve under this path, as a reverse proxy forwards it"
              " (e.g. /queuectl).")
@click.option("--users", metavar="FILE", help="The users file (NAME:ROLE:BCRYPT-HASH lines; see"
              " 'queuectl web-user'). Without one, anyone who can reach the dashboard may look, no one act.")
@click.option("--user-header", metavar="NAME", help="Trust this header (e.g. X-Remote-User) to name the user"
              " when the request comes from this host: a reverse proxy that signs users in. Needs --users.")
@click.option("--read-only", flag_value=True, default=None, help="No actions for anyone, whatever their role.")
@click.option("--interval", metavar="SECONDS", help="How often the pages read the queue [default: 3s].")
@click.option("--allow-host", metavar="NAME", multiple=True, help="Answer requests for this host name too (a"
              " reverse proxy's public name, this host's name; .example.org: it and its subdomains); repeatable."
              " Loopback's names and the bound address are always answered, any other is refused (421).")
@pass_app
def web(app, **options):
    """Serve the dashboard: the queue live in a browser, with actions for operators.

    Pages: the overview at /, jobs at /jobs (?state=dead&queue=build), a job at /jobs/ID, and
    /queues, /workers, /schedules. Options not given come from the [web] section of the site
    configuration file (bind, url-prefix, users, user-header, read-only, interval, hosts for
    --allow-host). Runs in the foreground until Ctrl+C or SIGTERM. Exits 78 when asked to listen
    beyond loopback without users.

    \b
    Examples:
      queuectl web
      queuectl web --bind 0.0.0.0:8765 --users /etc/queuectl/web-users --allow-host queue.example.org
      queuectl web --url-prefix /queuectl --users /etc/queuectl/web-users --allow-host queue.example.org
    """
    try:
        _serve(app, options)
    except InvalidConfig:
        from queuectl.web.serve import turn_away

        turn_away()  # under socket activation: else systemd starts the service again for the waiting clients
        raise


def _serve(app, options) -> None:
    from queuectl.web import config, users

    _need_libraries()
    from queuectl.web import app as dashboard
    from queuectl.web.hosts import Allowed
    from queuectl.web.reads import Connections
    from queuectl.web.serve import serve, where_to_listen

    site = app.site()
    cfg = config.load(options, site.web, site.path or "the site configuration")
    if cfg.user_header and not cfg.users:
        raise InvalidConfig("--user-header needs --users: the users file gives each user named their role")
    known = users.load(cfg.users) if cfg.users else None
    listen = where_to_listen(cfg)  # before the database is made: a refused bind makes nothing
    app.store().close()  # the database opens (made if new) before anything is served; the pages open their own
    db = app.db_path()

    def open_store(read_only: bool):
        return Database(db, app.db_source).store(read_only=read_only)

    connections = Connections(open_store, cfg.interval)

    def say(line: str) -> None:
        click.echo(f"queuectl web: {line}", err=True)

    # The names it answers to: its bind's (the name as given, and the address it resolved to) or, under
    # socket activation, the sockets' addresses, with the configured ones.
    allowed = Allowed.served(cfg.hosts, [host for host, _ in listen.addresses] + ([] if listen.passed else [cfg.host]))
    serve(cfg, dashboard.create_app(cfg, connections, known, allowed, say), say,
          at_exit=lambda: say(connections.summary()), listen=listen, answers=allowed.listed())


def _need_libraries() -> None:
    """Raise InvalidConfig naming the packages to install when the dashboard's libraries are missing."""
    import importlib.util


    missing = [name for name in ("flask", "gunicorn", "bcrypt") if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidConfig(f"queuectl web needs {', '.join(missing)}: apt-get install python3-flask"
                            " python3-gunicorn python3-bcrypt (in a virtualenv of the source tree:"
                            " pip install -e '.[web]')")


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
    import sys

    from queuectl.web import users, userfile

    _need_libraries()
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
    from queuectl.web import userfile

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
    import json

    from queuectl.web import users

    listed = users.load(path).values()
    if as_json:
        click.echo(json.dumps([{"name": u.name, "role": u.role, "password": u.hash is not None} for u in listed]))
        return
    for user in listed:
        click.echo(f"{user.name}\t{user.role}" + ("" if user.hash else "\t(header only)"))
