"""The actions (POST with the CSRF token): start an acquisition, cancel a run, send a signal.

Each one validates like the CLI and calls what the CLI calls (``umt.app.App``, the engine);
errors are the CLI's messages (``umt.cli.errors.classify``), shown on the page the form was on.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from umt.cli.errors import EXIT_USAGE, CliError, classify
from umt.cli.params import check_run_id, parse_duration_option, parse_json_option
from umt.engine import EngineError, UnknownRun
from umt.media.sources import MAX_TORRENT_BYTES, InvalidSource
from umt.web.csrf import csrf_ok
from umt.web.pages import dashboard, render_run, render_runs

if TYPE_CHECKING:
    from umt.media.sources import TorrentSource

_SCHEME = re.compile(r"magnet:|[a-z][a-z0-9+.-]*://", re.IGNORECASE)

#: Errors an action reports on its page; anything else is a bug (500).
_EXPECTED = (CliError, EngineError, InvalidSource, OSError)


async def start_acquire(request: Request) -> Response:
    form = await request.form()
    if not csrf_ok(request, form):
        return _csrf_refused()
    upload = form.get("torrent")
    torrent = None
    if isinstance(upload, UploadFile) and upload.filename:
        torrent = (upload.filename, await upload.read(MAX_TORRENT_BYTES + 1))
    return await run_in_threadpool(_start_acquire, request, form, torrent)


def _start_acquire(
    request: Request, form: FormData, torrent: tuple[str, bytes] | None
) -> Response:
    fields = {name: _text(form, name) for name in ("source", "name", "retention")}
    try:
        source = _source(fields["source"], torrent)
        retention = _retention(fields["retention"])
        result = dashboard(request).app.start_acquire(
            source, title=fields["name"] or None, retention=retention)
    except _EXPECTED as exc:
        status_code, message = _failure(exc)
        return render_runs(request, error=message, form=fields, status_code=status_code)
    notice = "started" if result.created else "exists"
    return RedirectResponse(f"/runs/{result.run.id}?notice={notice}", status_code=303)


async def cancel(request: Request) -> Response:
    form = await request.form()
    if not csrf_ok(request, form):
        return _csrf_refused()
    return await run_in_threadpool(_cancel, request)


def _cancel(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    try:
        run = dashboard(request).app.engine().cancel(check_run_id(run_id))
    except _EXPECTED as exc:
        status_code, message = _failure(exc)
        return render_run(request, run_id, error=message, status_code=status_code)
    return RedirectResponse(f"/runs/{run.id}?notice=canceled", status_code=303)


async def signal(request: Request) -> Response:
    form = await request.form()
    if not csrf_ok(request, form):
        return _csrf_refused()
    return await run_in_threadpool(_signal, request, form)


def _signal(request: Request, form: FormData) -> Response:
    from umt.engine.store.store import validate_signal_name

    name, data, run_id = _text(form, "name"), _text(form, "data"), _text(form, "run") or None
    try:
        if run_id is not None:
            run_id = check_run_id(run_id)
        validate_signal_name(name)
        value = parse_json_option(data, "data") if data else None
        result = dashboard(request).app.engine().signal(name, value, run_id=run_id)
    except _EXPECTED as exc:
        status_code, message = _failure(exc)
        if run_id is None:
            return render_runs(request, error=message, status_code=status_code)
        return render_run(request, run_id, error=message, status_code=status_code)
    notice = "kept" if result.kept else "delivered"
    target = f"/runs/{run_id}" if run_id else "/"
    return RedirectResponse(f"{target}?notice={notice}", status_code=303)


# ---------------------------------------------------------------------- helpers


def _source(text: str, torrent: tuple[str, bytes] | None) -> TorrentSource:
    from umt.media.sources import parse_source, parse_torrent_bytes

    if torrent is not None:
        filename, data = torrent
        return parse_torrent_bytes(data, origin=filename)
    # A path would make the server read one of its own files: only magnets and URLs here.
    if text and not _SCHEME.match(text):
        raise CliError("paste a magnet link or the http(s) URL of a .torrent file, "
                       "or choose a .torrent file", EXIT_USAGE)
    return parse_source(text)


def _retention(text: str) -> timedelta | None:
    return parse_duration_option(text, "retention") if text else None


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _failure(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and the CLI's message for an action that failed."""
    code, message = classify(exc)
    if isinstance(exc, UnknownRun):
        return 404, message or "unknown run"
    return (400 if code == EXIT_USAGE else 409), message or "failed"


def _csrf_refused() -> Response:
    return PlainTextResponse("refused: the form's CSRF token is missing or wrong; reload the "
                             "page and try again", status_code=403)
