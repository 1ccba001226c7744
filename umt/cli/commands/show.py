"""umt show: a run's timeline (steps, attempts, durations), ledger and live progress."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from umt.cli.application import Application, get_app
from umt.cli.errors import EXIT_USAGE
from umt.cli.params import JsonOption, check_run_id
from umt.cli.render import (
    compact_json,
    error_message,
    run_title,
    run_warnings,
    size_text,
    span,
    status_text,
    when,
)
from umt.cli.runs_view import get_run

if TYPE_CHECKING:
    from rich.console import RenderableType

    from umt.engine import Attempt, Engine, Run, Step
    from umt.records.ledger import LedgerEntry


@dataclass(frozen=True)
class Snapshot:
    run: Run
    steps: list[Step]
    attempts: list[Attempt]
    ledger: list[LedgerEntry]
    now: datetime

    @classmethod
    def read(cls, engine: Engine, run_id: str) -> Snapshot:
        from umt.records.ledger import entries_of_run

        return cls(engine.get(run_id), engine.steps(run_id), engine.attempts(run_id),
                   entries_of_run(engine.database, run_id), engine.clock.now())

    @property
    def settled(self) -> bool:
        return self.run.finished and self.run.compensation not in ("pending", "running")

    def progress(self) -> list[tuple[Attempt, dict[str, Any]]]:
        return [(attempt, attempt.progress) for attempt in self.attempts
                if attempt.status == "running" and isinstance(attempt.progress, dict)]


def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to show.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep showing until the run has settled.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Show a run in detail: the timeline of its steps and attempts with their durations,
    the side-effect ledger (what each step did to the outside world), and the progress of a
    copy in flight (a progress bar on a terminal).

    Example: umt show 0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90 --follow
    """
    app = get_app(ctx, json_output=json_output)
    run_id = check_run_id(run_id)
    if follow and app.json:
        app.abort("--follow cannot be combined with --json", EXIT_USAGE)
    engine, _ = get_run(app, run_id)
    snapshot = Snapshot.read(engine, run_id)
    if app.json:
        app.print_json(snapshot_json(snapshot))
    elif not follow:
        app.out.print(render(snapshot, bars=app.out.is_terminal))
    elif app.out.is_terminal:
        _follow_live(app, engine, snapshot)
    else:
        _follow_lines(app, engine, snapshot)


# ---------------------------------------------------------------------- JSON


def snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    run = snapshot.run
    return {
        "run_id": run.id, "workflow": run.workflow, "version": run.version,
        "status": run.status, "detail": run.detail, "compensation": run.compensation,
        "title": run_title(run) or None, "output": run.output, "error": run.error,
        "warnings": run_warnings(run, snapshot.steps),
        "created_at": run.created_at, "finished_at": run.finished_at,
        "steps": [
            {"phase": step.phase, "position": step.position, "name": step.name,
             "kind": step.kind, "status": step.status, "started_at": step.created_at,
             "finished_at": step.finished_at, "signal": step.signal_name,
             "wake_at": step.wake_at, "error": step.error,
             "attempts": [
                 {"attempt": a.attempt, "status": a.status, "worker_id": a.worker_id,
                  "lease_epoch": a.lease_epoch, "started_at": a.started_at,
                  "finished_at": a.finished_at, "error": a.error, "progress": a.progress}
                 for a in _attempts_of(snapshot, step)
             ]}
            for step in snapshot.steps
        ],
        "ledger": [
            {"recorded_at": e.recorded_at, "step": e.step, "attempt": e.attempt,
             "worker_id": e.worker_id, "lease_epoch": e.lease_epoch,
             "operation": e.operation, "phase": e.phase, "detail": e.detail}
            for e in snapshot.ledger
        ],
    }


def _attempts_of(snapshot: Snapshot, step: Step) -> list[Attempt]:
    return [a for a in snapshot.attempts if a.phase == step.phase and a.position == step.position]


# ---------------------------------------------------------------------- human


# rich is imported in the functions that draw: 'show --json' never loads it.


def render(snapshot: Snapshot, *, bars: bool) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    run = snapshot.run
    header = Text(f"run {run.id}  {run.workflow}@{run.version}  ")
    header.append_text(status_text(run.status))
    if run.compensation:
        header.append(f" (compensation {run.compensation})")
    parts: list[RenderableType] = [header]
    title = run_title(run)
    if title:
        parts.append(Text(f"title: {title}"))
    if run.detail:
        parts.append(Text(f"detail: {run.detail}"))
    parts.append(Text(""))
    parts.append(_timeline(snapshot))
    parts.extend(_progress(snapshot, bars=bars))
    message = error_message(run.error)
    if message:
        parts.append(Text(f"error: {message}", style="red"))
    if run.output is not None:
        parts.append(Text(f"output: {compact_json(run.output, 400)}"))
    parts.extend(Text(f"warning: {warning}", style="yellow")
                 for warning in run_warnings(run, snapshot.steps))
    parts.append(Text(""))
    parts.append(_ledger(snapshot))
    return Group(*parts)


def _timeline(snapshot: Snapshot) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    if not snapshot.steps:
        return Text("no step has started yet")
    table = Table(box=None, pad_edge=False, title="timeline", title_justify="left")
    for column in ("STARTED", "STEP", "STATUS", "TOOK", "NOTE"):
        table.add_column(column, no_wrap=column != "NOTE")
    for step in snapshot.steps:
        name = step.name if step.phase == "main" else f"{step.name} (compensation)"
        table.add_row(when(step.created_at), name, status_text(step.status),
                      span(step.created_at, step.finished_at, snapshot.now), _step_note(step))
        for attempt in _attempts_of(snapshot, step):
            note = error_message(attempt.error) or ""
            table.add_row(
                "", Text(f"  attempt {attempt.attempt}", style="dim"),
                status_text(attempt.status),
                span(attempt.started_at, attempt.finished_at, snapshot.now),
                Text(f"worker {attempt.worker_id[:8]} lease {attempt.lease_epoch}"
                     + (f": {note}" if note else ""), style="dim"),
            )
    return table


def _step_note(step: Step) -> str:
    if step.kind == "signal" and step.signal_name:
        return f"signal {step.signal_name}"
    if step.kind == "sleep" and step.wake_at is not None:
        return f"until {when(step.wake_at)}"
    if step.status == "succeeded":
        return ""  # an error recorded by an earlier, retried attempt is shown on that attempt
    return error_message(step.error) or ""


def _progress(snapshot: Snapshot, *, bars: bool) -> list[RenderableType]:
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    lines: list[RenderableType] = []
    for attempt, progress in snapshot.progress():
        done = float(progress.get("done") or 0)
        total = progress.get("total")
        label = f"{attempt.step_name}" + (f" {progress['file']}" if progress.get("file") else "")
        if total:
            amount = f"{size_text(done)} of {size_text(total)} ({done / float(total):.0%})"
        else:
            amount = size_text(done)
        if bars and total:
            table = Table.grid(padding=(0, 1))
            table.add_row(label, ProgressBar(total=float(total), completed=done, width=40),
                          amount)
            lines.append(table)
        else:
            lines.append(Text(f"progress: {label}: {amount}"))
    return lines


def _ledger(snapshot: Snapshot) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    if not snapshot.ledger:
        return Text("ledger: no entries")
    table = Table(box=None, pad_edge=False, title="ledger", title_justify="left")
    for column in ("RECORDED", "STEP", "ATTEMPT", "OPERATION", "PHASE", "DETAIL"):
        table.add_column(column, no_wrap=column not in ("OPERATION", "DETAIL"))
    for entry in snapshot.ledger:
        table.add_row(when(entry.recorded_at), entry.step, str(entry.attempt), entry.operation,
                      entry.phase, compact_json(entry.detail))
    return table


# ---------------------------------------------------------------------- --follow


def _follow_live(app: Application, engine: Engine, snapshot: Snapshot) -> None:
    from rich.live import Live

    with Live(render(snapshot, bars=True), console=app.out, refresh_per_second=4) as live:
        while not snapshot.settled:
            time.sleep(1.0)
            snapshot = Snapshot.read(engine, snapshot.run.id)
            live.update(render(snapshot, bars=True))


def _follow_lines(app: Application, engine: Engine, snapshot: Snapshot) -> None:
    app.out.print(render(snapshot, bars=False))
    last = _summary_line(snapshot)
    while not snapshot.settled:
        time.sleep(1.0)
        snapshot = Snapshot.read(engine, snapshot.run.id)
        line = _summary_line(snapshot)
        if line != last:
            app.out.print(f"{when(snapshot.now)}  {line}")
            last = line


def _summary_line(snapshot: Snapshot) -> str:
    run = snapshot.run
    current = next((s for s in reversed(snapshot.steps) if s.phase == "main"), None)
    parts: list[str] = [run.status]
    if run.compensation:
        parts.append(f"compensation {run.compensation}")
    if current is not None:
        parts.append(f"{current.name} {current.status}")
    for attempt, progress in snapshot.progress():
        total = progress.get("total")
        if total:
            parts.append(f"{attempt.step_name} {float(progress.get('done') or 0) / total:.0%}")
    if run.detail:
        parts.append(run.detail)
    return " | ".join(parts)
