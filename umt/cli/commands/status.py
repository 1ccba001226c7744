"""umt status: one run's status, steps and result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from umt.cli.application import Application, get_app
from umt.cli.params import JsonOption, check_run_id
from umt.cli.render import compact_json, error_message, run_title, status_text, when
from umt.cli.runs_view import get_run

if TYPE_CHECKING:
    from umt.engine import Run, Step


def status(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to show.")],
    json_output: JsonOption = False,
) -> None:
    """Show a run: status (pending, running, waiting, sleeping, succeeded, failed, canceled),
    what it is doing, its steps with their attempts, and its output or error.

    Example: umt status 0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90 --json
    """
    app = get_app(ctx, json_output=json_output)
    engine, run = get_run(app, check_run_id(run_id))
    steps = engine.steps(run.id)
    if app.json:
        app.print_json(status_json(run, steps))
    else:
        print_status(app, run, steps)


def status_json(run: Run, steps: list[Step]) -> dict[str, Any]:
    return {
        "run_id": run.id, "workflow": run.workflow, "version": run.version,
        "status": run.status,
        "steps": [
            {"name": step.name, "status": step.status, "attempts": step.attempts,
             "phase": step.phase, "kind": step.kind}
            for step in steps
        ],
        "output": run.output, "error": run.error, "detail": run.detail,
        "compensation": run.compensation, "title": run_title(run) or None,
        "created_at": run.created_at, "updated_at": run.updated_at,
        "finished_at": run.finished_at,
    }


def print_status(app: Application, run: Run, steps: list[Step]) -> None:
    line = status_text(run.status)
    if run.compensation:
        line.append(f" (compensation {run.compensation})")
    app.out.print(f"run {run.id}  {run.workflow}@{run.version}  ", line, sep="", end="\n")
    title = run_title(run)
    if title:
        app.out.print(f"title:    {title}")
    if run.detail:
        app.out.print(f"detail:   {run.detail}")
    app.out.print(f"created:  {when(run.created_at)}   updated: {when(run.updated_at)}"
                  + (f"   finished: {when(run.finished_at)}" if run.finished_at else ""))
    if steps:
        from rich.table import Table  # here: --json never loads rich

        table = Table(box=None, pad_edge=False)
        for column in ("#", "STEP", "STATUS", "ATTEMPTS", "FINISHED"):
            table.add_column(column, no_wrap=True)
        for step in steps:
            name = step.name if step.phase == "main" else f"{step.name} (compensation)"
            table.add_row(str(step.position), name, status_text(step.status),
                          str(step.attempts), when(step.finished_at))
        app.out.print(table)
    if run.output is not None:
        app.out.print(f"output:   {compact_json(run.output, 400)}")
    message = error_message(run.error)
    if message:
        app.out.print(f"error:    {message}")
