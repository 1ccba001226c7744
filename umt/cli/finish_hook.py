"""umt's part of qBittorrent's finish hook: the done signal for a torrent a run waits for.

Kept free of typer and rich: ``umt.cli.entry`` runs it without the command-line framework,
since qBittorrent starts the hook for every torrent it finishes, most of them other tools'.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from umt.cli.errors import EXIT_USAGE, handle
from umt.textsafe import printable

if TYPE_CHECKING:
    from umt.cli.application import Application

V1_HASH = re.compile(r"[0-9a-fA-F]{40}")
#: What a shell answers for a program it cannot find or start.
_NOT_FOUND, _NOT_STARTED = 127, 126


def signal_done(app: Application, info_hash: str) -> None:
    if info_hash == "-":
        app.info("umt hook: the torrent has no v1 info-hash (v2-only); nothing to signal, "
                 "'umt resume' reconciles it")
        return
    if not V1_HASH.fullmatch(info_hash):
        app.abort(f"{printable(info_hash)!r} is not a v1 info-hash (40 hexadecimal digits)",
                  EXIT_USAGE)
    from umt.engine import SchemaNotReady

    try:
        engine = app.existing_engine()
    except SchemaNotReady:
        return  # tables not created yet, so no run: another tool's torrent
    if engine is None:
        return  # no database yet, so no run: another tool's torrent
    from umt.media.torrentnames import done_signal_name
    from umt.media.tracking import tracks_torrent

    if not tracks_torrent(engine, info_hash):
        return
    name = done_signal_name(info_hash.lower())
    result = engine.signal(name, {"source": "hook"})
    if result.kept:
        app.info(f"umt hook: {name}: no run waits yet, signal kept")
    else:
        app.info(f"umt hook: {name}: delivered to run {', '.join(result.delivered_to)}")


def untracked_at_a_glance(config_path: Path | None, info_hash: str) -> bool:
    """True when ``signal_done`` would end without a word for this torrent: the configuration
    is one the full settings accept without a warning, read without building them
    (``umt.config_hook``), and no run tracks the torrent (or there is no database yet).
    False leaves the answer to ``signal_done``: a tracked torrent, a configuration or database
    only the full path can judge, or any error, which it reports in its own words."""
    if not V1_HASH.fullmatch(info_hash):
        return False
    from umt.app import open_engine, pool_size_for
    from umt.cli.application import cli_environment
    from umt.config_hook import hook_settings
    from umt.engine import SchemaNotReady, parse_database_url
    from umt.media.tracking import tracks_torrent

    settings = hook_settings(config_path, env=cli_environment())
    if settings is None:
        return False
    target = parse_database_url(settings.database_url)
    if target.kind == "sqlite" and target.sqlite_path and not target.sqlite_path.exists():
        return True  # as ``Application.existing_engine``: no database, so no run
    try:
        engine = open_engine(settings.database_url, settings.engine_schema,
                             pool_size=pool_size_for(settings.concurrency),
                             sqlite_poll_interval=settings.sqlite_poll_interval,
                             lease=settings.lease, signal_ttl=settings.signal_ttl)
    except SchemaNotReady:
        return True  # tables not created yet, so no run
    except Exception:
        return False
    try:
        return not tracks_torrent(engine, info_hash)
    except Exception:
        return False
    finally:
        engine.close()


def signal_then_run(app: Application, info_hash: str, previous: list[str]) -> int:
    """umt's part, then the finish program qBittorrent ran before umt's hook was installed;
    that program's exit status (umt's part cannot stop it: its failure is only reported)."""
    try:
        signal_done(app, info_hash)
    except Exception as exc:  # umt's part must never stop the user's program
        handle(exc)
    return run_previous(previous)


def run_previous(argv: list[str]) -> int:
    """Runs the user's program on our own stdin/stdout/stderr, after what umt wrote there; its
    exit status, shell-style."""
    import subprocess  # here: the plain hook (no program to chain) does not need it

    sys.stderr.flush()
    sys.stdout.flush()
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
