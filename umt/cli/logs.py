"""Log records go to stderr as plain lines, secrets masked; warnings and up by default.

The root command installs the handler for the duration of the invocation; long-running
commands (worker) raise the verbosity with ``set_level``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from umt.cli.errors import redact

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Libraries whose warnings repeat what umt reports in its own words.
_QUIET = ("urllib3", "requests", "qbittorrentapi", "psycopg")


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is at the time (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


@contextmanager
def logging_to_stderr(level: int = logging.WARNING) -> Iterator[None]:
    root = logging.getLogger()
    handler = _StderrHandler()
    handler.setFormatter(_RedactingFormatter(_FORMAT))
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
        root.setLevel(previous_level)
        for name, quiet_level in quiet.items():
            logging.getLogger(name).setLevel(quiet_level)


def set_level(level: int) -> None:
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, _StderrHandler):
            handler.setLevel(level)
    root.setLevel(level)
