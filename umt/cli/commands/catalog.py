"""umt catalog: the media imported into the library."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.params import MAX_LIST_LIMIT, JsonOption
from umt.cli.render import size_text, when


def catalog(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MAX_LIST_LIMIT, metavar="N",
                          help="At most N items (up to 10000).")
    ] = 100,
    json_output: JsonOption = False,
) -> None:
    """List the imports recorded in the media catalog, newest first: title, size, library
    paths, how they were imported, and the run that did it.

    Example: umt catalog --limit 20
    """
    app = get_app(ctx, json_output=json_output)
    engine = app.existing_engine()
    items = []
    if engine is not None:
        from umt.records.catalog import items as catalog_items

        items = catalog_items(engine.database, limit=limit)
    if app.json:
        app.print_json([item.to_json() for item in items])
        return
    if not items:
        app.info("the catalog is empty")
        return
    from rich.table import Table  # here: --json never loads rich

    table = Table(box=None, pad_edge=False)
    for column in ("IMPORTED", "TITLE", "SIZE", "METHOD", "PATHS", "RUN"):
        table.add_column(column, no_wrap=column in ("IMPORTED", "SIZE", "RUN"))
    for item in items:
        table.add_row(when(item.imported_at), item.title, size_text(item.size),
                      item.import_method, "\n".join(item.library_paths), item.run_id)
    app.out.print(table)
