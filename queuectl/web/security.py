"""What keeps the dashboard's pages and actions safe: response headers, CSRF tokens and the same-origin check.

- Every response carries HEADERS: a Content-Security-Policy that allows no inline script and no
  framing (`frame-ancestors 'none'`), `X-Content-Type-Options: nosniff`, no referrer beyond this
  origin, and no caching of pages (which hold the queue's data).
- Every state change is a POST that must carry the signed-in user's token (`csrf_token`, in each
  form) and come from this origin: `Sec-Fetch-Site` same-origin where the browser sends it (Sidekiq
  8.1's check), and an `Origin` whose host is the request's Host where it is sent (OWASP's CSRF
  cheat sheet: verifying origin with standard headers). A GET never changes anything.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from queuectl.domain.errors import PermissionDenied

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
       " form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
#: The form field that carries the token.
FIELD = "csrf"


def csrf_token(key: bytes, user: str) -> str:
    """Return the CSRF token of `user` under the server's `key` (hex; the same for every page of a process)."""
    return hmac.new(key, b"csrf\0" + user.encode(), hashlib.sha256).hexdigest()


def check_post(key: bytes, user: str, token: str | None, headers, host: str) -> None:
    """Refuse a state change that is not this user's, from this origin: raises PermissionDenied saying why.

    `headers`: the request's (a mapping, case-insensitive as Werkzeug's); `host`: the host[:port] the client
    asked for (queuectl.web.hosts.asked_host). A non-browser client (curl) sends neither Sec-Fetch-Site nor
    Origin and is held by the token alone.
    """
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        raise PermissionDenied(f"refused: a change from another site (Sec-Fetch-Site: {site})")
    origin = headers.get("Origin")
    if origin is not None:
        if origin == "null" or urlsplit(origin).netloc.lower() != host.lower():
            raise PermissionDenied("refused: a change from another origin")
    if not token or not hmac.compare_digest(token, csrf_token(key, user)):
        raise PermissionDenied("refused: the form's token is missing or stale; load the page again")
