"""`queuectl web`: the dashboard (queuectl.web); this module only parses, checks and reports. Its users file is
`queuectl web-user`'s (queuectl.cli.webuser).

The dashboard's libraries (Flask, gunicorn, bcrypt) are optional, as PostgreSQL's driver is: `web --help`, the
man pages and completion do without them, and `queuectl web` without them says in one line what to install
(queuectl.web.need_libraries). So the application, queuectl.web.app, which imports Flask, is imported once they
are found.
"""

from __future__ import annotations

import click

from queuectl.api.database import Database
from queuectl.cli.common import pass_app
from queuectl.domain.errors import InvalidConfig
from queuectl.web import config, need_libraries, users
from queuectl.web.hosts import Allowed
from queuectl.web.reads import Connections
from queuectl.web.serve import serve, turn_away, where_to_listen


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
        turn_away()  # under socket activation: else systemd starts the service again for the waiting clients
        raise


def _serve(app, options) -> None:
    need_libraries()
    from queuectl.web import app as dashboard  # seam: an optional library (Flask), found first (need_libraries)

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
