"""umt hook: what qBittorrent runs (see 'umt qbittorrent install-hook')."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.errors import handle
from umt.cli.finish_hook import signal_done
from umt.textsafe import printable

hook_app = typer.Typer(
    name="hook", no_args_is_help=True,
    help="Entry points for qBittorrent's \"run external program\" hook.\n\n"
         "Example: umt hook download-done 0123456789abcdef0123456789abcdef01234567",
)

#: What a shell answers for a program it cannot find or start.
_NOT_FOUND, _NOT_STARTED = 127, 126


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
    try:
        signal_done(get_app(ctx), info_hash)
    except Exception as exc:  # umt's part must never stop the user's program
        handle(exc)
    except typer.Exit:
        pass
    sys.stderr.flush()
    sys.stdout.flush()
    raise typer.Exit(_run_previous(previous))


def _run_previous(argv: list[str]) -> int:
    """Runs the user's program on our own stdin/stdout/stderr; its exit status, shell-style."""
    try:
        completed = subprocess.run(argv, check=False)
    except FileNotFoundError:
        sys.stderr.write(f"umt hook: {printable(argv[0])}: program not found\n")
        return _NOT_FOUND
    except OSError as exc:
        sys.stderr.write(f"umt hook: cannot run {printable(argv[0])}: {exc.strerror or exc}\n")
        return _NOT_STARTED
    code = completed.returncode
    return 128 - code if code < 0 else code
