"""The one middleware every request passes: host check, token check, security headers.

It wraps the whole application, so the live stream, static files and error pages are guarded
and get the same headers as pages.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from urllib.parse import urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "umt_token"
TOKEN_PARAM = "token"

#: Nothing from elsewhere: scripts, styles and fetches from this server only, no framing, forms
#: post only here, no plugins.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not no-referrer: browsers would then send "Origin: null" with our own forms.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class Guard:
    """Refuses what the dashboard must not answer, then adds the security headers.

    ``token``: required on every request (``Authorization: Bearer``, or the cookie set after
    opening a page once with ``?token=``); None when listening on loopback only.
    ``allowed_hosts``: the names the ``Host`` header may carry (None: any). On loopback this
    stops DNS rebinding: a hostile page whose name resolves to 127.0.0.1 cannot read ours.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, allowed_hosts: Iterable[str] | None
    ) -> None:
        self.app = app
        self.token = token
        self.allowed_hosts = frozenset(allowed_hosts) if allowed_hosts is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        refusal = self._refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, request: Request) -> Response | None:
        if self.allowed_hosts is not None and _host_name(request.headers) not in self.allowed_hosts:
            return PlainTextResponse("unknown host name", status_code=400)
        if self.token is None or self._has_token(request):
            return None
        offered = request.query_params.get(TOKEN_PARAM)
        if request.method == "GET" and offered is not None and self._matches(offered):
            return _enter(request, self.token)
        return PlainTextResponse(
            "umt web: a token is required (see 'umt web --show-token')", status_code=401,
            headers={"www-authenticate": 'Bearer realm="umt"'},
        )

    def _has_token(self, request: Request) -> bool:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self._matches(credentials.strip()):
            return True
        return self._matches(request.cookies.get(TOKEN_COOKIE, ""))

    def _matches(self, offered: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(offered.encode(), self.token.encode())


def _enter(request: Request, token: str) -> Response:
    """The page asked for, without the token in its address (history, logs), with the cookie."""
    kept = [(name, value) for name, value in request.query_params.multi_items()
            if name != TOKEN_PARAM]
    target = request.url.path + (f"?{urlencode(kept)}" if kept else "")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/")
    return response


def _host_name(headers: Headers) -> str:
    host = headers.get("host", "")
    if host.startswith("["):  # [::1]:8080
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
