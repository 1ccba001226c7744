"""umt db: migrate the schema, show its state, collect garbage."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import Application, get_app
from umt.cli.params import JsonOption, parse_duration_option

db_app = typer.Typer(
    name="db", no_args_is_help=True,
    help="The database: migrate its schema, show its state, collect garbage.\n\n"
         "Example: umt db migrate",
)


@db_app.command("migrate")
def migrate(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Create or upgrade umt's tables (engine and business schemas). Idempotent and safe to run
    concurrently; PostgreSQL is used only after this ran, the embedded SQLite database is
    migrated on first use anyway.

    Example: umt --config /etc/umt/config.toml db migrate
    """
    app = get_app(ctx, json_output=json_output)
    engine = app.app.engine(migrate_embedded=False, check_schema=False)
    applied = engine.migrate()
    if app.json:
        app.print_json({
            "database": engine.database.describe(),
            "applied": [{"component": m.component, "version": m.version, "name": m.name}
                        for m in applied],
        })
        return
    for migration in applied:
        app.out.print(f"applied {migration.component} {migration.version:04d}_{migration.name}")
    app.out.print(f"{engine.database.describe()}: schema is current"
                  + ("" if applied else " (nothing to do)"))


@db_app.command("status")
def status(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Show which schema version each component has and which this umt needs. Writes nothing.

    Example: umt db status --json
    """
    app = get_app(ctx, json_output=json_output)
    if _embedded_missing(app):
        where = app.settings.database_target().sqlite_path
        if app.json:
            app.print_json({"database": str(where), "exists": False, "current": False,
                            "components": []})
        else:
            app.out.print(f"no database yet at {where}: it is created on first use "
                          "(or by 'umt db migrate')")
        return
    engine = app.app.engine(migrate_embedded=False, check_schema=False)
    states = engine.schema_state()
    current = all(state.current for state in states)
    if app.json:
        app.print_json({
            "database": engine.database.describe(), "exists": True, "current": current,
            "components": [{"component": s.component, "applied": s.applied, "known": s.known,
                            "current": s.current} for s in states],
        })
        return
    app.out.print(engine.database.describe())
    for state in states:
        verdict = "current" if state.current else (
            "NEWER than this umt: upgrade umt" if state.applied > state.known
            else "needs 'umt db migrate'")
        app.out.print(f"  {state.component}: version {state.applied} of {state.known} ({verdict})")


@db_app.command("gc")
def gc(
    ctx: typer.Context,
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="DURATION",
                          help="Delete finished runs, old signals and stopped workers older "
                               "than this (30d, P4W).")
    ],
    json_output: JsonOption = False,
) -> None:
    """Delete finished runs (with their steps and attempts) that finished longer ago than
    --older-than, expired or old signals, and records of stopped workers. Runs that are not
    finished, or still compensating, are never deleted.

    Example: umt db gc --older-than 90d
    """
    app = get_app(ctx, json_output=json_output)
    cutoff = parse_duration_option(older_than, "--older-than")
    if _embedded_missing(app):
        deleted = {"runs": 0, "signals": 0, "workers": 0}
    else:
        deleted = app.engine().collect_garbage(cutoff)
    if app.json:
        app.print_json({"deleted": deleted})
        return
    app.out.print("deleted " + ", ".join(f"{count} {what}" for what, count in deleted.items()))


def _embedded_missing(app: Application) -> bool:
    target = app.settings.database_target()
    return target.kind == "sqlite" and target.sqlite_path is not None and (
        not target.sqlite_path.exists())
