"""umt web: serve the live dashboard in the browser."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from umt.cli.application import get_app


def web(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS",
                          help="Address to listen on. Anything but loopback requires the token.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, metavar="PORT", help="Port to listen on.")
    ] = 8080,
    show_token: Annotated[
        bool, typer.Option("--show-token",
                           help="Print the access token (made on first use) and exit.")
    ] = False,
) -> None:
    """Serve a live dashboard of the database: runs, their timelines and copy progress, the
    catalog, the doctor checks and the workers; start, cancel and signal runs from the page.

    Listens on 127.0.0.1 unless --host says otherwise; then every request needs the token
    kept (mode 0600) in the user's config dir: open http://HOST:PORT/?token=TOKEN once.

    Example: umt web --host 0.0.0.0 --port 8080
    """
    app = get_app(ctx)
    from umt.web.token import default_token_path, load_or_create_token

    token_path = default_token_path()
    if show_token:
        app.out.print(load_or_create_token(token_path)[0])
        return
    loopback = _is_loopback(host)
    token: str | None = None
    if not loopback:
        token, created = load_or_create_token(token_path)
        if created:
            app.info(f"umt web: made an access token in {token_path}; "
                     "see it with 'umt web --show-token'")

    from umt.cli.commands.doctor import run_checks
    from umt.web.guard import LOOPBACK_HOSTS
    from umt.web.server import create_app, serve

    site = create_app(app.app, checks=lambda: run_checks(app), token=token,
                      allowed_hosts=LOOPBACK_HOSTS if loopback else None)
    shown_host = f"[{host}]" if ":" in host else host
    app.info(f"umt web: serving http://{shown_host}:{port}/ (Ctrl-C stops)")
    serve(site, host=host, port=port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        if not host:
            raise typer.BadParameter("empty address", param_hint="--host") from None
        return False  # a host name: it may resolve to anything

