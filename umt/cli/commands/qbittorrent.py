"""umt qbittorrent: install and show the finish hook that signals umt."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.hookprogram import plan_hook
from umt.cli.params import JsonOption

qbittorrent_app = typer.Typer(
    name="qbittorrent", no_args_is_help=True,
    help="qBittorrent integration: the \"run external program on torrent finished\" hook.\n\n"
         "Example: umt qbittorrent install-hook --dry-run",
)


@qbittorrent_app.command("install-hook")
def install_hook(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only print the program line; change nothing.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Set qBittorrent's "run external program on torrent finished" to this umt:
    '<absolute path of umt> --config <absolute config path> hook download-done %I'.

    qBittorrent runs it without a shell and without your environment, so the database must be
    set in the config file: the command refuses if it comes only from UMT_DATABASE_URL.

    Example: umt --config ~/.config/umt/config.toml qbittorrent install-hook
    """
    app = get_app(ctx, json_output=json_output)
    plan = plan_hook(app.settings)
    for note in plan.notes:
        app.warn(note)
    if plan.problems:
        app.abort("not installing the hook: " + "; ".join(plan.problems), EXIT_FAILED)
    previous = None
    if not dry_run:
        qbt = app.app.qbittorrent()
        previous = qbt.finish_hook()
        qbt.set_finish_hook(plan.program)
    if app.json:
        app.print_json({"program": plan.program, "installed": not dry_run,
                        "previous": previous})
        return
    if dry_run:
        app.out.print(plan.program)
        app.info("dry run: qBittorrent was not changed")
        return
    if previous and previous != plan.program:
        app.info(f"replaced the previous finish program: {previous}")
    from umt.textsafe import redact_url

    where = redact_url(app.settings.qbittorrent.url)
    app.out.print(f"installed in qBittorrent at {where}: {plan.program}")


@qbittorrent_app.command("show-hook")
def show_hook(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Show qBittorrent's current finish program and whether it is the one this umt installs.

    Example: umt qbittorrent show-hook --json
    """
    app = get_app(ctx, json_output=json_output)
    plan = plan_hook(app.settings)
    current = app.app.qbittorrent().finish_hook()
    matches = current == plan.program
    if app.json:
        app.print_json({"program": current, "expected": plan.program, "installed": matches,
                        "problems": plan.problems})
        return
    app.out.print(f"current:  {current or '(no finish program)'}")
    app.out.print(f"expected: {plan.program}")
    app.out.print("the hook is installed" if matches
                  else "the hook is not installed: run 'umt qbittorrent install-hook'")
