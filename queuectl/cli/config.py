"""Commands for the queue's settings, kept in the database."""

from __future__ import annotations

import click

from queuectl.api import config as api
from queuectl.cli.common import HelpGroup, json_option, pass_app, print_json, print_table
from queuectl.domain.settings import SETTINGS, show_value


@click.group(cls=HelpGroup)
def config():
    """Read and change settings (stored in the database, shared by every worker).

    \b
    Examples:
      queuectl config list
      queuectl config set max-retries 5
    """


@config.command(name="set", context_settings={"ignore_unknown_options": True})  # VALUE may be "-1"
@click.argument("key")
@click.argument("value")
@pass_app
def set_(app, key, value):
    """Set KEY to VALUE (keys take hyphens or underscores).

    \b
    Examples:
      queuectl config set max-retries 5
      queuectl config set job_timeout 600
      queuectl config set job-timeout none
    """
    name, stored = api.set_(app.store(), key, value)
    click.echo(f"{name} = {show_value(name, stored)}")


@config.command()
@click.argument("key")
@json_option
@pass_app
def get(app, key, as_json):
    """Print the value of KEY in force.

    \b
    Example:
      queuectl config get backoff-base
    """
    name, value = api.get(app.store(), key)
    if as_json:
        print_json(value)
        return
    click.echo(show_value(name, value))


@config.command(name="list")
@json_option
@pass_app
def list_(app, as_json):
    """List every setting with its value and meaning.

    \b
    Example:
      queuectl config list --json
    """
    values = api.all_settings(app.store())
    if as_json:
        print_json(values)
        return
    print_table(["KEY", "VALUE", "MEANING"], [[k, show_value(k, v), SETTINGS[k].help] for k, v in values.items()])
