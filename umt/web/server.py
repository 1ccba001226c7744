"""The Starlette application of ``umt web`` and the uvicorn server that serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from umt.cli.errors import redact
from umt.textsafe import printable
from umt.web import actions, pages
from umt.web.feed import ChangeFeed
from umt.web.guard import LOOPBACK_HOSTS, Guard

if TYPE_CHECKING:
    from umt.app import App
    from umt.cli.commands.doctor import Check


@dataclass
class Dashboard:
    """What every page and action uses, kept in ``request.app.state.dashboard``."""

    app: App
    #: The ``umt doctor`` checks.
    checks: Callable[[], list[Check]]
    feed: ChangeFeed
    templates: Jinja2Templates


def shown(value: object) -> str:
    """Every stranger's text as a page shows it: no secret, control characters escaped
    (HTML escaping is autoescape's job, after this)."""
    return printable(redact(str(value)))


def _finalize(value: Any) -> Any:
    # Applied to every {{ expression }} before autoescaping: nothing reaches a page raw.
    if value is None or isinstance(value, Markup | int | float):
        return value
    return shown(value)


def templates() -> Jinja2Templates:
    environment = Environment(
        loader=PackageLoader("umt.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=_finalize, trim_blocks=True, lstrip_blocks=True,
    )
    environment.filters["printable"] = shown
    return Jinja2Templates(env=environment)


def create_app(
    app: App, *, checks: Callable[[], list[Check]], token: str | None,
    allowed_hosts: Iterable[str] | None = LOOPBACK_HOSTS,
) -> Starlette:
    """The dashboard of ``app``'s database. ``token``: required on every request (None: no
    token, for loopback); ``allowed_hosts``: the accepted ``Host`` names (None: any)."""
    engine = app.engine()
    settings = app.settings.engine
    feed = ChangeFeed(
        engine, sqlite_interval=settings.sqlite_poll_interval.total_seconds(),
        idle_interval=settings.poll_interval.total_seconds(),
        workflow_keys=app.registry().keys(),
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            feed.close()

    routes = [
        Route("/", pages.runs_page, methods=["GET"], name="runs"),
        Route("/runs", actions.start_acquire, methods=["POST"], name="start"),
        Route("/runs/{run_id}", pages.run_page, methods=["GET"], name="run"),
        Route("/runs/{run_id}/cancel", actions.cancel, methods=["POST"], name="cancel"),
        Route("/signal", actions.signal, methods=["POST"], name="signal"),
        Route("/catalog", pages.catalog_page, methods=["GET"], name="catalog"),
        Route("/health", pages.health_page, methods=["GET"], name="health"),
        Route("/events", pages.events, methods=["GET"], name="events"),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]
    web = Starlette(
        routes=routes, lifespan=lifespan,
        middleware=[Middleware(Guard, token=token, allowed_hosts=allowed_hosts)],
    )
    web.state.dashboard = Dashboard(app, checks, feed, templates())
    return web


def serve(web: Starlette, *, host: str, port: int) -> None:
    import uvicorn

    # Open live streams would hold a graceful shutdown forever: cut them after a second.
    uvicorn.run(web, host=host, port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=1, server_header=False)
