"""umt tables: the tables of the engine and business schemas, one schema.table per line."""

from __future__ import annotations

import typer

from umt.cli.application import get_app
from umt.cli.params import JsonOption


def tables(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """List the tables umt keeps in its database, as schema.table.

    On PostgreSQL these are the engine's schema (engine.schema, default umt) and the business
    schema next to it (umt_media); SQLite has a single schema, main. The embedded database is
    created and migrated if it does not exist yet; on PostgreSQL the list is empty until
    'umt db migrate' ran.

    Example: umt tables
    """
    app = get_app(ctx, json_output=json_output)
    engine = app.app.engine(check_schema=False)
    with engine.database.autocommit() as session:
        rows = session.rows("list_tables", schemas=list(app.app.schemas))
    names = [f"{row['table_schema']}.{row['table_name']}" for row in rows]
    if app.json:
        app.print_json({"database": engine.database.describe(), "tables": names})
        return
    for name in names:
        app.out.print(name)
