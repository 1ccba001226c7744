"""umt runs: list runs, newest first."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.params import MAX_LIST_LIMIT, RUN_STATUSES, JsonOption, check_status
from umt.cli.render import run_title, run_warnings, status_text, when
from umt.cli.runs_view import inspecting_engine


def runs(
    ctx: typer.Context,
    status: Annotated[
        str | None,
        typer.Option("--status", metavar="STATUS", help=f"Only runs in this status: "
                     f"{', '.join(RUN_STATUSES)}."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MAX_LIST_LIMIT, metavar="N",
                          help="At most N runs (up to 10000).")
    ] = 50,
    json_output: JsonOption = False,
) -> None:
    """List runs, newest first, with their status and what they are doing.

    Example: umt runs --status waiting --limit 10
    """
    app = get_app(ctx, json_output=json_output)
    check_status(status)
    engine = inspecting_engine(app)
    found = engine.list_runs(status=status, limit=limit) if engine is not None else []
    if app.json:
        app.print_json([
            {"run_id": run.id, "workflow": run.workflow, "version": run.version,
             "status": run.status, "title": run_title(run) or None, "detail": run.detail,
             "compensation": run.compensation, "warnings": run_warnings(run),
             "created_at": run.created_at, "updated_at": run.updated_at}
            for run in found
        ])
        return
    if not found:
        app.info("no runs" + (f" with status {status}" if status else ""))
        return
    from rich.table import Table  # here: --json never loads rich

    table = Table(box=None, pad_edge=False)
    for column in ("RUN", "WORKFLOW", "STATUS", "TITLE", "DETAIL", "CREATED", "UPDATED"):
        table.add_column(column, no_wrap=column in ("RUN", "STATUS", "CREATED", "UPDATED"))
    for run in found:
        status_cell = status_text(run.status)
        if run.compensation:
            status_cell.append(f" (compensation {run.compensation})")
        warnings = run_warnings(run)
        if warnings:
            status_cell.append(f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})",
                               style="yellow")
        detail = run.detail or ("; ".join(warnings) if warnings else "")
        table.add_row(run.id, run.workflow, status_cell, run_title(run), detail,
                      when(run.created_at), when(run.updated_at))
    app.out.print(table)
