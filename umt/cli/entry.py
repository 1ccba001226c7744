"""The console script ``umt``: the finish hook's plain form without the command-line framework.

qBittorrent runs ``umt [--config PATH] hook download-done HASH`` for every torrent it finishes,
most of them other tools'. That exact form is served here without importing typer (with its
pydantic type adapters), the command modules or rich, which are most of a command's start-up:
the same ``Application``, logging and error handler (``errors.handle``) as the full command
line, and ``umt.cli.commands.hook`` does the same thing through typer. Every other command
line, including any variation of this one (``--json``, a chained program, a malformed hash),
goes to ``umt.cli.main``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from umt.cli.finish_hook import V1_HASH
from umt.textsafe import is_utf8

_HOOK = ["hook", "download-done"]


def plain_hook(words: list[str]) -> tuple[Path | None, str] | None:
    """(config file, info-hash) when ``words`` is the finish hook's plain form, else None."""
    config: str | None = None
    if len(words) == 5 and words[0] in ("--config", "-c"):
        config, words = words[1], words[2:]
    elif len(words) == 4 and words[0].startswith("--config="):
        config, words = words[0].removeprefix("--config="), words[1:]
    if len(words) != 3 or words[:2] != _HOOK or not V1_HASH.fullmatch(words[2]):
        return None
    if config is None:
        return None, words[2]
    if not config or config.startswith("-") or not is_utf8(config):
        return None  # the full command line says what is wrong with it
    return Path(config), words[2]


def run_plain_hook(config: Path | None, info_hash: str) -> int:
    """What ``umt [--config PATH] hook download-done HASH`` does through typer; its exit code."""
    from umt.cli import errors
    from umt.cli.application import Application
    from umt.cli.finish_hook import signal_done
    from umt.cli.logs import logging_to_stderr

    try:
        with logging_to_stderr():
            application = Application(config)
            try:
                signal_done(application, info_hash)
            finally:
                application.close()
    except BaseException as exc:  # the one handler of the full command line
        return errors.handle(exc)
    return errors.EXIT_OK


def main() -> None:
    hook = plain_hook(sys.argv[1:])
    if hook is not None:
        sys.exit(run_plain_hook(*hook))
    from umt.cli.main import main as full_command_line

    full_command_line()
