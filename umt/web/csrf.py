"""CSRF protection of the actions: a random token in a SameSite cookie, repeated in each form.

Another site can make a browser post a form here, but cannot read the cookie to copy it into
the form (double-submit); a foreign ``Origin`` is refused too.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

CSRF_COOKIE = "umt_csrf"
CSRF_FIELD = "csrf"


def csrf_token(request: Request) -> str:
    """The browser's token; a new one (set by :func:`keep_token`) if it has none yet."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if len(token) < 32:
        token = getattr(request.state, "new_csrf", None) or secrets.token_urlsafe(32)
        request.state.new_csrf = token
    return token


def keep_token(request: Request, response: Response) -> None:
    new = getattr(request.state, "new_csrf", None)
    if new is not None:
        response.set_cookie(CSRF_COOKIE, new, httponly=True, samesite="strict", path="/")


def csrf_ok(request: Request, form: FormData) -> bool:
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return False
    cookie = request.cookies.get(CSRF_COOKIE, "")
    offered = form.get(CSRF_FIELD)
    if len(cookie) < 32 or not isinstance(offered, str):
        return False
    return hmac.compare_digest(offered.encode(), cookie.encode())
