"""umt hook: what qBittorrent runs (see 'umt qbittorrent install-hook')."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Annotated

import typer

from umt.cli.application import Application, get_app
from umt.cli.errors import EXIT_USAGE, handle
from umt.textsafe import printable

hook_app = typer.Typer(
    name="hook", no_args_is_help=True,
    help="Entry points for qBittorrent's \"run external program\" hook.\n\n"
         "Example: umt hook download-done 0123456789abcdef0123456789abcdef01234567",
)

_V1_HASH = re.compile(r"[0-9a-fA-F]{40}")
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
        _signal_done(get_app(ctx), info_hash)
        return
    try:
        _signal_done(get_app(ctx), info_hash)
    except Exception as exc:  # umt's part must never stop the user's program
        handle(exc)
    except typer.Exit:
        pass
    sys.stderr.flush()
    sys.stdout.flush()
    raise typer.Exit(_run_previous(previous))


def _signal_done(app: Application, info_hash: str) -> None:
    if info_hash == "-":
        app.info("umt hook: the torrent has no v1 info-hash (v2-only); nothing to signal, "
                 "'umt resume' reconciles it")
        return
    if not _V1_HASH.fullmatch(info_hash):
        app.abort(f"{printable(info_hash)!r} is not a v1 info-hash (40 hexadecimal digits)",
                  EXIT_USAGE)
    from umt.engine import SchemaNotReady

    try:
        engine = app.existing_engine()
    except SchemaNotReady:
        return  # tables not created yet, so no run: another tool's torrent
    if engine is None:
        return  # no database yet, so no run: another tool's torrent
    from umt.media.request import done_signal_name
    from umt.media.tracking import tracks_torrent

    if not tracks_torrent(engine, info_hash):
        return
    name = done_signal_name(info_hash.lower())
    result = engine.signal(name, {"source": "hook"})
    if result.kept:
        app.info(f"umt hook: {name}: no run waits yet, signal kept")
    else:
        app.info(f"umt hook: {name}: delivered to run {', '.join(result.delivered_to)}")


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
