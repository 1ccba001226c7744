"""umt signal: send a named signal to the runs waiting for it, or keep it until one waits."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.params import JsonOption, check_key, check_run_id, parse_json_option


def signal(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Signal name, e.g. download-done:<info-hash>.")
    ],
    data: Annotated[
        str | None, typer.Option("--data", metavar="JSON", help="JSON value carried by the signal.")
    ] = None,
    run: Annotated[
        str | None,
        typer.Option("--run", metavar="RUN_ID", help="Deliver only to this run."),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option("--idempotency-key", metavar="KEY",
                     help="Sending again with the same key does nothing and reports the first "
                          "outcome."),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Send a signal: delivered to every run waiting for NAME now, else kept for the first run
    that waits for it (until it expires, engine.signal_ttl).

    A signal aimed at a finished run is refused (exit 1).

    Example: umt signal download-done:0123456789abcdef0123456789abcdef01234567
    """
    app = get_app(ctx, json_output=json_output)
    from umt.engine.store.store import validate_signal_name

    validate_signal_name(name)
    value = parse_json_option(data, "--data") if data is not None else None
    run_id = check_run_id(run) if run is not None else None
    idempotency_key = check_key(idempotency_key, "--idempotency-key")

    engine = app.engine() if run_id is None else app.existing_engine()
    if engine is None:  # a targeted signal needs its run: no database, no run
        from umt.engine import UnknownRun

        raise UnknownRun(str(run_id))
    result = engine.signal(name, value, run_id=run_id, idempotency_key=idempotency_key)
    if app.json:
        app.print_json({
            "signal": result.name, "delivered_to": list(result.delivered_to), "kept": result.kept,
            "duplicate": result.duplicate, "signal_id": result.signal_id,
        })
        return
    prefix = "already sent with this idempotency key: " if result.duplicate else ""
    if result.kept:
        app.out.print(f"{prefix}kept {result.name}: no run waits for it yet")
    else:
        app.out.print(f"{prefix}delivered {result.name} to run "
                      + ", ".join(result.delivered_to))
