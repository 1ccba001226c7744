"""The ``umt`` command line. Commands live in ``umt.cli.commands``, one module each.

Every exception raised while a command runs ends in ``UmtGroup.main``, the one place that turns
exceptions into exit codes (through ``umt.cli.errors.handle``): CliRunner tests and the console
script take the same path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from umt.cli import errors
from umt.cli.application import Application
from umt.cli.commands import (
    cancel,
    catalog,
    db,
    doctor,
    hook,
    qbittorrent,
    resume,
    runs,
    show,
    signal,
    start_acquire,
    status,
    systemd,
    tables,
    verify,
    web,
    worker,
)
from umt.cli.logs import logging_to_stderr
from umt.cli.params import not_utf8


class UmtGroup(TyperGroup):
    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        position = not_utf8(words)
        if position is not None:  # refused before any command can open a database
            sys.stderr.write(f"umt: error: argument {position} is not valid UTF-8\n")
            if standalone_mode:
                sys.exit(errors.EXIT_USAGE)
            return errors.EXIT_USAGE
        try:
            result = super().main(words, prog_name or "umt", complete_var,
                                  standalone_mode=False, **extra)
            code = result if isinstance(result, int) else errors.EXIT_OK
        except BaseException as exc:  # the one place that maps exceptions to exit codes
            code = errors.handle(exc)
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    name="umt", cls=UmtGroup, no_args_is_help=True, add_completion=True, rich_markup_mode=None,
    pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]},
    epilog=errors.EXIT_CODES_HELP,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("umt")
        except PackageNotFoundError:
            number = "unknown"
        typer.echo(f"umt {number}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", metavar="PATH", show_default=False,
                     help="Config file (TOML). Default: $UMT_CONFIG, else "
                          "~/.config/umt/config.toml if it exists."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print results as JSON on stdout (for scripts).")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True,
                           help="Print the version and exit.")
    ] = False,
) -> None:
    """umt (UHD Media Tool): acquire media through qBittorrent as durable workflows.

    Each acquisition downloads a torrent, imports it into the library, keeps seeding for a
    while and cleans up, surviving crashes and restarts. Settings come from the config file
    and UMT_* variables (see config.example.toml).

    Example: umt start-acquire 'magnet:?xt=urn:btih:...' && umt worker
    """
    application = Application(config, json_output=json_output)
    ctx.obj = application
    ctx.with_resource(logging_to_stderr())
    ctx.call_on_close(application.close)


app.command("start-acquire", cls=start_acquire.StartAcquireCommand)(start_acquire.start_acquire)
app.command("signal")(signal.signal)
app.command("cancel")(cancel.cancel)
app.command("worker")(worker.worker)
app.command("resume")(resume.resume)
app.command("runs")(runs.runs)
app.command("status")(status.status)
app.command("show")(show.show)
app.command("tables")(tables.tables)
app.command("catalog")(catalog.catalog)
app.command("doctor")(doctor.doctor)
app.command("verify")(verify.verify)
app.command("web")(web.web)
app.command("systemd")(systemd.systemd)
app.add_typer(db.db_app)
app.add_typer(qbittorrent.qbittorrent_app)
app.add_typer(hook.hook_app)


def main() -> None:
    """The console script ``umt``."""
    app()


if __name__ == "__main__":
    main()
