"""umt start-acquire: start the acquire workflow for a magnet link, .torrent file or URL."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from umt.cli.application import Application, get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.params import (
    JsonOption,
    check_key,
    check_title,
    parse_bounded_duration,
    parse_duration_option,
)
from umt.cli.render import error_message, run_title

if TYPE_CHECKING:
    from umt.engine import Engine, Run

FOREVER = "forever"
#: The step after which the media is in the library and catalogued (only seeding remains).
IMPORTED_AFTER_STEP = "register"


class StartAcquireCommand(TyperCommand):
    """Lets ``--wait`` go without a value (Click options cannot have an optional value)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, optional_wait_value(args))


def optional_wait_value(args: list[str]) -> list[str]:
    """A bare ``--wait`` becomes ``--wait=forever``; the next word is its value only if it is
    a duration, so ``--wait SOURCE`` still means "wait, no limit"."""
    rewritten = list(args)
    for index, arg in enumerate(rewritten):
        if arg == "--":
            break
        if arg == "--wait":
            following = rewritten[index + 1] if index + 1 < len(rewritten) else None
            if following is None or not _is_duration(following):
                rewritten[index] = f"--wait={FOREVER}"
    return rewritten


def _is_duration(text: str) -> bool:
    from umt.engine import InvalidDuration, parse_duration

    try:
        parse_duration(text)
    except InvalidDuration:
        return False
    return True


def start_acquire(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="SOURCE",
                            help="Magnet link, path of a .torrent file, or http(s) URL of one.")
    ],
    retention: Annotated[
        str | None,
        typer.Option("--retention", metavar="DURATION",
                     help="Seeding time before cleanup, e.g. 7d or 0 "
                          "(default: acquire.retention)."),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="TITLE",
                     help="Title used in the library path (default: the torrent's name)."),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option("--idempotency-key", metavar="KEY",
                     help="Starting again with the same key returns the same run "
                          "(default: the info-hash)."),
    ] = None,
    wait: Annotated[
        str | None,
        typer.Option("--wait", metavar="[SECONDS]",
                     help="Wait until the media is imported or the run ends; optionally at most "
                          "this long (30, 15m). Exit 1 if the run fails or time runs out."),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Start acquiring a torrent: download, import into the library, seed, clean up.

    Prints the run id. Nothing is written if the source is not a usable torrent. A worker
    ('umt worker' or 'umt resume') executes the run.

    Example: umt start-acquire 'magnet:?xt=urn:btih:...&dn=Film' --retention 3d
    """
    app = get_app(ctx, json_output=json_output)
    from umt.config_values import TEN_YEARS

    retention_value = (
        parse_bounded_duration(retention, "--retention", TEN_YEARS) if retention else None
    )
    name = check_title(name, "--name")
    idempotency_key = check_key(idempotency_key, "--idempotency-key")
    timeout = _wait_timeout(wait)

    from umt.media.sources import parse_source

    torrent = parse_source(source)
    result = app.app.start_acquire(torrent, title=name, retention=retention_value,
                                   idempotency_key=idempotency_key)
    engine = app.engine()
    run = result.run
    if not result.created:
        app.info(
            f"run {run.id} already exists for this torrent ({run.status}); pass another "
            "--idempotency-key to start a new one"
        )
    elif not app.json:
        app.info(f"started acquiring {run_title(run)!r} (info-hash {torrent.info_hash}); "
                 f"follow it with: umt show {run.id}")
    if wait is not None:
        run = _wait(engine, run, timeout)
    imported = _imported_paths(engine, run)
    if app.json:
        app.print_json({
            "run_id": run.id, "status": run.status, "created": result.created,
            "info_hash": torrent.info_hash,
            **({"imported": imported is not None, "library_paths": imported or []}
               if wait is not None else {}),
        })
    else:
        app.out.print(run.id)
    if wait is not None:
        _report_wait(app, run, imported, timeout)


def _wait_timeout(wait: str | None) -> float | None:
    if wait is None or wait == FOREVER:
        return None
    return parse_duration_option(wait, "--wait").total_seconds()


def _imported_paths(engine: Engine, run: Run) -> list[str] | None:
    for step in engine.steps(run.id):
        if step.phase == "main" and step.name == IMPORTED_AFTER_STEP and step.status == "succeeded":
            result: Any = step.result
            return list(result.get("library_paths", [])) if isinstance(result, dict) else []
    return None


def _wait(engine: Engine, run: Run, timeout: float | None) -> Run:
    deadline = None if timeout is None else time.monotonic() + timeout
    while not run.finished and _imported_paths(engine, run) is None:
        if deadline is not None and time.monotonic() >= deadline:
            break
        time.sleep(0.5)
        run = engine.get(run.id)
    return run


def _report_wait(
    app: Application, run: Run, imported: list[str] | None, timeout: float | None
) -> None:
    if run.status in ("failed", "canceled"):
        reason = error_message(run.error)
        app.abort(f"run {run.id} {run.status}" + (f": {reason}" if reason else ""), EXIT_FAILED)
    if imported is None and not run.finished:
        app.abort(
            f"run {run.id} is still {run.status} after waiting {timeout:g}s "
            "(is a worker running? see 'umt show')", EXIT_FAILED,
        )
    if not app.json:
        for path in imported or []:
            app.info(f"imported: {path}")
