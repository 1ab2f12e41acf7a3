"""The web dashboard (`queuectl web`): the queue live in a browser, with actions for operators.

config (where it listens, who may do what), users and userfile (the users file), security (headers,
CSRF, same origin), reads (the shared connections and readings), charts (SVG), app (the WSGI
application, roles, errors), pages (GET), actions (POST), serve (gunicorn, socket activation).
Built on queuectl.api, never on the CLI. docs/web.md is its reference.
"""
