"""Log records go to stderr (or a file) as plain lines, secrets masked, strangers' text escaped.

The one place logging is configured. The root command installs the stderr handler for the
duration of the invocation (warnings and up); long-running commands (worker, resume) choose
their level and destination with ``use_options`` (``-v``, ``-q``, ``--log-file``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from umt.cli.errors import EXIT_USAGE, CliError, redact
from umt.textsafe import printable

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Libraries whose warnings repeat what umt reports in its own words.
_QUIET = ("urllib3", "requests", "qbittorrentapi", "psycopg")
#: Each -v or -q moves the threshold by one of these steps.
_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)


class _SafeFormatter(logging.Formatter):
    """One line per record: a torrent name with a newline or an ESC sequence cannot forge
    or rewrite lines; passwords and database URLs are masked (a traceback keeps its lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(redact(super().formatMessage(record)))

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have cached the traceback's text unescaped in the record.
        cached, record.exc_text = record.exc_text, None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatException(self, ei: Any) -> str:
        return printable(redact(super().formatException(ei)), keep_newlines=True)

    def formatStack(self, stack_info: str) -> str:
        return printable(redact(super().formatStack(stack_info)), keep_newlines=True)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is at the time (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class _LogFileHandler(logging.FileHandler):
    """The ``--log-file`` of this invocation (removed when it ends)."""


@contextmanager
def logging_to_stderr(level: int = logging.WARNING) -> Iterator[None]:
    root = logging.getLogger()
    handler = _StderrHandler()
    handler.setFormatter(_SafeFormatter(_FORMAT))
    previous_level = root.level
    quiet = {name: logging.getLogger(name).level for name in _QUIET}
    root.addHandler(handler)
    try:
        for name in quiet:
            logging.getLogger(name).setLevel(logging.ERROR)
        set_level(level)
        yield
    finally:
        root.removeHandler(handler)
        for other in [h for h in root.handlers if isinstance(h, _LogFileHandler)]:
            root.removeHandler(other)
            other.close()
        root.setLevel(previous_level)
        for name, quiet_level in quiet.items():
            logging.getLogger(name).setLevel(quiet_level)


def set_level(level: int) -> None:
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, _StderrHandler | _LogFileHandler):
            handler.setLevel(level)
    root.setLevel(level)


def chosen_level(default: int, verbose: int, quiet: int) -> int:
    """``default`` moved one step down per ``-v``, one step up per ``-q``; both is a usage
    error (exit 2)."""
    if verbose and quiet:
        raise CliError("-v/--verbose and -q/--quiet cannot be used together", EXIT_USAGE)
    index = _LEVELS.index(default) - verbose + quiet
    return _LEVELS[max(0, min(len(_LEVELS) - 1, index))]


def check_log_file(path: Path) -> Path:
    """``path`` if a log file can be appended there; a usage error (exit 2) otherwise, before
    anything is written."""
    folder = path.parent
    try:
        if path.is_dir():
            raise CliError(f"--log-file: {printable(path)} is a folder", EXIT_USAGE)
        if not folder.is_dir():
            raise CliError(f"--log-file: folder {printable(folder)} does not exist", EXIT_USAGE)
        writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK)
    except (OSError, ValueError) as exc:  # a NUL character, a name too long
        raise CliError(f"--log-file: {printable(path)}: {exc}", EXIT_USAGE) from None
    if not writable:
        raise CliError(f"--log-file: {printable(path)} is not writable", EXIT_USAGE)
    return path


def use_options(default: int, verbose: int, quiet: int, log_file: Path | None) -> None:
    """Applies a command's ``-v``/``-q``/``--log-file``; every check comes before any effect.

    With ``--log-file`` the lines are appended to that file instead of stderr (error messages
    of the command itself still go to stderr).
    """
    level = chosen_level(default, verbose, quiet)
    if log_file is not None:
        check_log_file(log_file)
        root = logging.getLogger()
        handler = _LogFileHandler(log_file, encoding="utf-8")
        handler.setFormatter(_SafeFormatter(_FORMAT))
        for stderr_handler in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
            root.removeHandler(stderr_handler)
        root.addHandler(handler)
    set_level(level)
