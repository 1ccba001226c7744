"""umt qbittorrent: install, show and uninstall the finish hook that signals umt.

umt never drops the finish program a user had: install-hook puts umt's hook in front of it
(umt's hook then runs it with the same arguments) unless --replace says otherwise, and
uninstall-hook puts back exactly the line that was there.
"""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.hookprogram import (
    chain_problem,
    chained,
    plan_hook,
    previous_program,
    read_program_line,
)
from umt.cli.params import JsonOption
from umt.textsafe import printable

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
    replace: Annotated[
        bool, typer.Option("--replace", help="Drop the finish program qBittorrent runs now "
                           "instead of running it after umt's hook.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Set qBittorrent's "run external program on torrent finished" to this umt:
    '<absolute path of umt> --config <absolute config path> hook download-done %I'.

    A finish program already set (Sonarr's, a script of yours) is kept: it is appended after
    ' -- ' and umt's hook runs it with the same arguments, passing on its output and exit
    status, even when umt's own part fails. If it cannot be carried unchanged, the command
    refuses (exit 2) unless --replace drops it. 'umt qbittorrent uninstall-hook' puts it back.

    qBittorrent runs the hook without a shell and without your environment, so the database
    must be set in the config file: the command refuses if it comes only from UMT_DATABASE_URL.

    Example: umt --config ~/.config/umt/config.toml qbittorrent install-hook
    """
    app = get_app(ctx, json_output=json_output)
    plan = plan_hook(app.settings)
    for note in plan.notes:
        app.warn(note)
    if plan.problems:
        app.abort("not installing the hook: " + "; ".join(plan.problems), EXIT_FAILED)
    from umt.media.qbittorrent import QbtAdapterError

    qbt = app.app.qbittorrent()
    try:
        current = qbt.finish_hook()
    except QbtAdapterError as exc:
        if not dry_run:
            raise
        app.warn(f"{exc}: the line below does not show the finish program qBittorrent runs "
                 "now, which install-hook would keep after ' -- '")
        current = None
    previous = previous_program(current, plan.program)
    if previous and not replace:
        problem = chain_problem(previous)
        if problem:
            app.usage_error(
                f"not installing the hook: qBittorrent runs '{printable(previous)}' when a "
                f"torrent finishes and umt cannot run it after its hook ({problem}); "
                "pass --replace to drop it"
            )
    kept = None if replace else previous
    program = chained(plan.program, kept)
    if not dry_run:
        qbt.set_finish_hook(program)
    if app.json:
        app.print_json({"program": program, "installed": not dry_run, "previous": previous,
                        "chained": kept})
        return
    if dry_run:
        app.out.print(program, markup=False, highlight=False, soft_wrap=True)
        app.info("dry run: qBittorrent was not changed")
        return
    if previous and replace:
        app.info(f"replaced the previous finish program: {printable(previous)}")
    elif previous:
        app.info(f"umt's hook runs the previous finish program after its own part: "
                 f"{printable(previous)}")
    from umt.textsafe import redact_url

    where = redact_url(app.settings.qbittorrent.url)
    app.out.print(f"installed in qBittorrent at {where}: {printable(program)}",
                  markup=False, highlight=False, soft_wrap=True)


@qbittorrent_app.command("show-hook")
def show_hook(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Show qBittorrent's current finish program, whether umt's hook is the one this umt
    installs, and the program it runs after its own part.

    Example: umt qbittorrent show-hook --json
    """
    app = get_app(ctx, json_output=json_output)
    plan = plan_hook(app.settings)
    current = app.app.qbittorrent().finish_hook()
    hook = read_program_line(current)
    matches = hook.umt_part == plan.program
    if app.json:
        app.print_json({"program": current, "umt_hook": hook.umt_part,
                        "chained": hook.previous if hook.is_umt else None,
                        "other_program": hook.previous if not hook.is_umt else None,
                        "expected": plan.program, "installed": matches,
                        "problems": plan.problems})
        return
    def show(line: str) -> None:
        app.out.print(line, markup=False, highlight=False, soft_wrap=True)

    show(f"current:  {printable(current or '(no finish program)')}")
    show(f"umt hook: {printable(hook.umt_part or '(not installed)')}")
    other = "runs after umt's hook" if hook.is_umt else "other program"
    show(f"{other}: {printable(hook.previous or '(none)')}")
    show(f"expected: {plan.program}")
    show("the hook is installed" if matches
         else "the hook is not installed: run 'umt qbittorrent install-hook'")


@qbittorrent_app.command("uninstall-hook")
def uninstall_hook(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Remove umt's hook from qBittorrent and put back the finish program it ran after its own
    part, exactly as it was (or no finish program if there was none). A finish program that is
    not umt's hook is left alone.

    Example: umt qbittorrent uninstall-hook
    """
    app = get_app(ctx, json_output=json_output)
    qbt = app.app.qbittorrent()
    current = qbt.finish_hook()
    hook = read_program_line(current)
    if hook.is_umt:
        qbt.set_finish_hook(hook.previous)
    if app.json:
        app.print_json({"removed": hook.is_umt, "restored": hook.previous if hook.is_umt
                        else None, "program": hook.previous})
        return
    if not hook.is_umt:
        app.info("umt's hook is not installed; qBittorrent was not changed")
        return
    restored = printable(hook.previous) if hook.previous else "(no finish program)"
    app.out.print(f"removed umt's hook; qBittorrent runs: {restored}", markup=False,
                  highlight=False, soft_wrap=True)
