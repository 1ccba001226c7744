"""umt hook: what qBittorrent runs (see 'umt qbittorrent install-hook')."""

from __future__ import annotations

from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.finish_hook import signal_done, signal_then_run

hook_app = typer.Typer(
    name="hook", no_args_is_help=True,
    help="Entry points for qBittorrent's \"run external program\" hook.\n\n"
         "Example: umt hook download-done 0123456789abcdef0123456789abcdef01234567",
)


@hook_app.command("download-done")
def download_done(
    ctx: typer.Context,
    info_hash: Annotated[
        str, typer.Argument(metavar="INFO_HASH",
                            help="The torrent's v1 info-hash (qBittorrent's %I).")
    ],
    previous: Annotated[
        list[str] | None,
        typer.Argument(metavar="[-- PROGRAM ARGS...]",
                       help="The finish program qBittorrent ran before umt's hook was "
                            "installed; run after umt's part, with its exit status."),
    ] = None,
) -> None:
    """Tell the run waiting for this torrent that its download finished (signal
    download-done:INFO_HASH). If its run does not wait yet the signal is kept for it; a torrent
    no unfinished run was started for (another tool's) costs nothing: exit 0, nothing written.
    Logs one line to stderr for a torrent umt tracks.

    After ' -- ', the program qBittorrent ran before: it runs after umt's part (which cannot
    stop it), and its output and exit status are umt's.

    Example: umt hook download-done 0123456789abcdef0123456789abcdef01234567
    """
    if not previous:
        signal_done(get_app(ctx), info_hash)
        return
    raise typer.Exit(signal_then_run(get_app(ctx), info_hash, previous))
