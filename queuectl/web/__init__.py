"""The web dashboard (`queuectl web`): the queue live in a browser, with actions for operators.

config (where it listens, who may do what), users and userfile (the users file), security (headers,
CSRF, same origin), reads (the shared connections and readings), charts (SVG), app (the WSGI
application, roles, errors), pages (GET), actions (POST), serve (gunicorn, socket activation).
Built on queuectl.api, never on the CLI. docs/web.md is its reference.

Its libraries (LIBRARIES) are optional, as PostgreSQL's driver is: only app, pages and actions import Flask,
and need_libraries says what to install before they are imported.
"""

import importlib.util

from queuectl.domain.errors import InvalidConfig

#: The libraries the dashboard runs on: Flask, gunicorn (serve) and bcrypt (users' passwords).
LIBRARIES = ("flask", "gunicorn", "bcrypt")


def need_libraries() -> None:
    """Raise InvalidConfig naming the packages to install when the dashboard's libraries are missing."""
    missing = [name for name in LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidConfig(f"queuectl web needs {', '.join(missing)}: apt-get install python3-flask"
                            " python3-gunicorn python3-bcrypt (in a virtualenv of the source tree:"
                            " pip install -e '.[web]')")
