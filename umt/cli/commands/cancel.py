"""umt cancel: stop a run; its compensation undoes what it started."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.params import JsonOption, check_run_id, parse_duration_option
from umt.cli.render import error_message


def cancel(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to cancel.")],
    wait: Annotated[
        str | None,
        typer.Option("--wait", metavar="SECONDS",
                     help="Wait at most this long (30, 2m) for the compensation to finish; "
                          "exit 1 if it does not."),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Cancel a run: the step in flight is told to stop, no later step runs, and compensation
    (remove the torrent it added, delete a partial import) is run by a worker.

    The library file of a finished import is never deleted. A run that already finished
    cannot be canceled (exit 1).

    Example: umt cancel 0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90 --wait 1m
    """
    app = get_app(ctx, json_output=json_output)
    run_id = check_run_id(run_id)
    timeout = parse_duration_option(wait, "--wait").total_seconds() if wait else None
    engine = app.existing_engine()
    if engine is None:
        from umt.engine import UnknownRun

        raise UnknownRun(run_id)
    run = engine.cancel(run_id)
    if timeout is not None:
        run = engine.wait(run_id, timeout)
    if app.json:
        app.print_json({"run_id": run.id, "status": run.status, "compensation": run.compensation})
    else:
        compensation = f"; compensation {run.compensation}" if run.compensation else ""
        app.out.print(f"run {run.id} {run.status}{compensation}")
    if timeout is None:
        return
    if run.compensation in ("pending", "running"):
        app.abort(f"the compensation of run {run.id} is still {run.compensation} after "
                  f"{timeout:g}s (is a worker running?)", EXIT_FAILED)
    if run.compensation == "failed":
        reason = error_message(run.error)
        app.abort(f"the compensation of run {run.id} failed"
                  + (f": {reason}" if reason else ""), EXIT_FAILED)
