"""umt verify: check a run's library files again against its torrent's piece hashes."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.params import JsonOption, check_run_id
from umt.cli.runs_view import get_run

_STYLES = {"ok": "green", "mismatch": "red", "missing": "red", "unverifiable": "yellow"}


def verify(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run whose files to check.")],
    json_output: JsonOption = False,
) -> None:
    """Read every library file a run imported and check it against the torrent's own piece
    hashes (SHA-1, from qBittorrent), also a hardlink or a reflink that the import itself never
    read. The torrent must still be in qBittorrent (it is while it seeds); once it is gone, a
    file imported with verify = "sha256" is checked against its recorded SHA-256 instead.

    Exit codes: 0 every file matches; 1 a file differs, is missing or cannot be checked;
    2 unknown run id, or a run that imported nothing.

    Example: umt verify 0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90 --json
    """
    app = get_app(ctx, json_output=json_output)
    run_id = check_run_id(run_id)
    engine, _ = get_run(app, run_id)
    checks = app.app.verify_imports(engine, run_id)
    if app.json:
        app.print_json({"run_id": run_id, "files": [check.to_json() for check in checks]})
    else:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, pad_edge=False)
        for column in ("STATUS", "BY", "PIECES", "FILE", "REASON"):
            table.add_column(column, no_wrap=column in ("STATUS", "BY", "PIECES"))
        for check in checks:
            table.add_row(Text(check.status, style=_STYLES[check.status]), check.by or "",
                          "" if check.pieces is None else str(check.pieces), check.path,
                          check.reason or "")
        app.out.print(table)
    failed = [check for check in checks if check.status != "ok"]
    if failed:
        app.abort(f"{len(failed)} of {len(checks)} files of run {run_id} did not verify",
                  EXIT_FAILED)
