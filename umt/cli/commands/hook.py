"""umt hook: what qBittorrent runs (see 'umt qbittorrent install-hook')."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.errors import EXIT_USAGE

hook_app = typer.Typer(
    name="hook", no_args_is_help=True,
    help="Entry points for qBittorrent's \"run external program\" hook.\n\n"
         "Example: umt hook download-done 0123456789abcdef0123456789abcdef01234567",
)

_V1_HASH = re.compile(r"[0-9a-fA-F]{40}")


@hook_app.command("download-done")
def download_done(
    ctx: typer.Context,
    info_hash: Annotated[
        str, typer.Argument(metavar="INFO_HASH",
                            help="The torrent's v1 info-hash (qBittorrent's %I).")
    ],
) -> None:
    """Tell the run waiting for this torrent that its download finished (signal
    download-done:INFO_HASH). If no run waits yet the signal is kept for it; exit 0 either way.
    Logs one line to stderr.

    Example: umt hook download-done 0123456789abcdef0123456789abcdef01234567
    """
    app = get_app(ctx)
    if info_hash == "-":
        app.info("umt hook: the torrent has no v1 info-hash (v2-only); nothing to signal, "
                 "'umt resume' reconciles it")
        return
    if not _V1_HASH.fullmatch(info_hash):
        app.abort(f"{info_hash!r} is not a v1 info-hash (40 hexadecimal digits)", EXIT_USAGE)
    from umt.media.request import done_signal_name

    name = done_signal_name(info_hash.lower())
    result = app.engine().signal(name, {"source": "hook"})
    if result.kept:
        app.info(f"umt hook: {name}: no run waits yet, signal kept")
    else:
        app.info(f"umt hook: {name}: delivered to run {', '.join(result.delivered_to)}")
