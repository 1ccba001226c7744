"""The console script ``umt``: the finish hook's own forms without the command-line framework.

qBittorrent runs ``umt [--config PATH] hook download-done HASH [-- PROGRAM ARGS...]`` for every
torrent it finishes, most of them other tools'. Those forms are served here without importing
typer (with its pydantic type adapters), the command modules or rich, which are most of a
command's start-up: through the same ``Application``, logging, hook code
(``umt.cli.finish_hook``) and error handler (``errors.handle``) as ``umt.cli.commands.hook``
uses through typer. Every other command line, including any variation of these (``--json``,
``-cPATH``, a malformed hash, an argument that is not UTF-8), goes to ``umt.cli.main``.

For a torrent no run tracks (most of them), the hook does not even build the settings models
(pydantic): ``finish_hook.untracked_at_a_glance`` reads the settings it needs with
``umt.config_hook``, which answers only when the full settings would accept the same file and
variables without a word; every other case takes the path above.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from umt.cli.finish_hook import V1_HASH
from umt.textsafe import is_utf8

_HOOK = ["hook", "download-done"]
_CHAIN = "--"


@dataclass(frozen=True)
class HookCall:
    config: Path | None
    info_hash: str
    #: The finish program qBittorrent ran before umt's hook was installed (None: none).
    previous: list[str] | None = None


def hook_call(words: list[str]) -> HookCall | None:
    """The finish hook's call when ``words`` is one of its own forms, else None."""
    if not all(is_utf8(word) for word in words):
        return None  # the full command line refuses it
    config: str | None = None
    if words[:1] in (["--config"], ["-c"]) and len(words) >= 2:
        config, words = words[1], words[2:]
    elif words[:1] and words[0].startswith("--config="):
        config, words = words[0].removeprefix("--config="), words[1:]
    if config is not None and (not config or config.startswith("-")):
        return None  # the full command line says what is wrong with it
    if len(words) < 3 or words[:2] != _HOOK:
        return None
    info_hash, rest = words[2], words[3:]
    if not (V1_HASH.fullmatch(info_hash) or info_hash == "-"):
        return None
    if rest and (rest[0] != _CHAIN or len(rest) < 2):
        return None
    return HookCall(Path(config) if config is not None else None, info_hash, rest[1:] or None)


def run_hook(call: HookCall) -> int:
    """What ``umt hook download-done`` does through typer, for ``call``; the exit code."""
    from umt.cli import errors
    from umt.cli.application import Application
    from umt.cli.finish_hook import (
        run_previous,
        signal_done,
        signal_then_run,
        untracked_at_a_glance,
    )
    from umt.cli.logs import logging_to_stderr

    try:
        with logging_to_stderr():
            if untracked_at_a_glance(call.config, call.info_hash):
                # another tool's torrent: what signal_done ends with, without the settings models
                return errors.EXIT_OK if call.previous is None else run_previous(call.previous)
            application = Application(call.config)
            try:
                if call.previous is None:
                    signal_done(application, call.info_hash)
                    return errors.EXIT_OK
                return signal_then_run(application, call.info_hash, call.previous)
            finally:
                application.close()
    except BaseException as exc:  # the one handler of the full command line
        return errors.handle(exc)


def main() -> None:
    call = hook_call(sys.argv[1:])
    if call is not None:
        sys.exit(run_hook(call))
    from umt.cli.main import main as full_command_line

    full_command_line()
