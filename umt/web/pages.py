"""The pages (GET only: reading never changes anything) and the live stream."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from umt.cli.commands.show import Snapshot
from umt.cli.params import RUN_STATUSES
from umt.cli.render import compact_json, error_message, run_title, size_text, span, when
from umt.engine import UnknownRun
from umt.web import present
from umt.web.csrf import CSRF_FIELD, csrf_token, keep_token

if TYPE_CHECKING:
    from umt.web.server import Dashboard

PAGE_SIZE = 50
SEARCH_MAX = 200
#: A comment line on an idle stream, so that proxies and browsers keep it open.
KEEPALIVE_SECONDS = 15.0

NOTICES = {
    "started": "Acquisition started.",
    "exists": "This torrent already has a run (the info-hash is its idempotency key).",
    "canceled": "Run canceled; a worker runs its compensation.",
    "delivered": "Signal delivered.",
    "kept": "Signal kept: no run waits for it yet.",
}


def dashboard(request: Request) -> Dashboard:
    board: Dashboard = request.app.state.dashboard
    return board


def render(
    request: Request, template: str, context: dict[str, Any], status_code: int = 200
) -> Response:
    board = dashboard(request)
    response: Response = board.templates.TemplateResponse(request, template, {
        **context,
        "csrf_field": CSRF_FIELD, "csrf_token": csrf_token(request),
        "version": board.feed.version, "now": board.app.engine().clock.now(),
        "notice": NOTICES.get(request.query_params.get("notice", "")),
        "when": when, "span": span, "size_text": size_text, "error_message": error_message,
        "compact_json": compact_json, "run_title": run_title, "age": present.age,
    }, status_code=status_code)
    keep_token(request, response)
    return response


# ---------------------------------------------------------------------- runs


def runs_page(request: Request) -> Response:
    return render_runs(request)


def render_runs(
    request: Request, *, error: str | None = None, form: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    engine = dashboard(request).app.engine()
    params = request.query_params
    status = params.get("status") or None
    if status not in (None, *RUN_STATUSES):
        status = None
    search = (params.get("q") or "").strip()[:SEARCH_MAX] or None
    page = engine.runs_page(status=status, search=search, before=_page_key(params.get("before")),
                            limit=PAGE_SIZE)
    now = engine.clock.now()
    progress = {attempt.run_id: present.copy_progress(attempt, now)
                for attempt in engine.running_attempts([run.id for run in page.runs])}
    older = None
    if page.next_key is not None:
        created_at, run_id = page.next_key
        kept = {name: value for name, value in (("status", status), ("q", search)) if value}
        older = "/?" + urlencode({**kept, "before": f"{created_at.isoformat()}_{run_id}"})
    return render(request, "runs.html", {
        "runs": page.runs, "progress": progress, "statuses": RUN_STATUSES, "status": status,
        "search": search or "", "older": older, "first_page": "before" not in params,
        "error": error, "form": form or {},
    }, status_code)


def _page_key(text: str | None) -> tuple[datetime, str] | None:
    if not text:
        return None
    moment, _, run_id = text.rpartition("_")
    try:
        created_at = datetime.fromisoformat(moment)
        return created_at, str(uuid.UUID(run_id))
    except ValueError:
        return None


# ---------------------------------------------------------------------- one run


def run_page(request: Request) -> Response:
    return render_run(request, request.path_params["run_id"])


def render_run(
    request: Request, run_id: str, *, error: str | None = None, status_code: int = 200
) -> Response:
    from umt.records.catalog import item_of_run

    engine = dashboard(request).app.engine()
    try:
        snapshot = Snapshot.read(engine, str(uuid.UUID(run_id)))
    except (ValueError, UnknownRun):
        return render(request, "missing.html", {"what": "run"}, 404)
    steps = snapshot.steps
    item = item_of_run(engine.database, snapshot.run.id)
    return render(request, "run.html", {
        "snapshot": snapshot, "run": snapshot.run, "title": run_title(snapshot.run),
        "timeline": [(step, [a for a in snapshot.attempts
                             if a.phase == step.phase and a.position == step.position])
                     for step in steps],
        "progress": [p for a in snapshot.attempts
                     if (p := present.copy_progress(a, snapshot.now)) is not None],
        "library_paths": item.library_paths if item else present.library_paths(steps),
        "awaited": present.awaited_signals(steps), "error": error,
    }, status_code)


# ---------------------------------------------------------------------- catalog, health


def catalog_page(request: Request) -> Response:
    from umt.records import catalog

    database = dashboard(request).app.engine().database
    search = (request.query_params.get("q") or "").strip()[:SEARCH_MAX]
    items = catalog.search(database, search) if search else catalog.items(database)
    return render(request, "catalog.html", {"items": items, "search": search})


def health_page(request: Request) -> Response:
    board = dashboard(request)
    return render(request, "health.html", {
        "checks": board.checks(), "workers": board.app.engine().live_workers(),
    })


# ---------------------------------------------------------------------- live stream


async def events(request: Request) -> Response:
    """Server-Sent Events: ``change`` after every change of the database; the page then
    fetches itself again. ``since``: the version the page was rendered at."""
    feed = dashboard(request).feed
    since = request.query_params.get("since")

    async def stream() -> AsyncIterator[str]:
        changed = asyncio.Event()
        feed.subscribe(changed)
        try:
            yield "retry: 3000\n\n"
            sent = since
            while True:
                # Each version once: a change published while this stream started may both
                # differ from ``since`` and set the event.
                if sent != (version := str(feed.version)):
                    yield f"event: change\ndata: {version}\n\n"
                    sent = version
                try:
                    await asyncio.wait_for(changed.wait(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield ": idle\n\n"
                    continue
                changed.clear()
        finally:
            feed.unsubscribe(changed)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"x-accel-buffering": "no"})
