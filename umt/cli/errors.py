"""Exit codes and the one function that turns an exception into an exit code and a message.

    0  success
    1  the operation failed or conflicts (database or qBittorrent unreachable, idempotency
       conflict, run already finished, run failed under --wait, ...)
    2  invalid input or usage (bad source, malformed JSON, duration or signal name, unknown
       run id, bad configuration); nothing was changed

An error class says its own exit code (``exit_code = 1`` or ``2``: ``EngineError``,
``ConfigError``, ``InvalidSource``, ``InvalidDuration``, ``QbtAdapterError`` and their kin), so
no table of classes is kept here and nothing is imported to recognise them.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterable
from typing import IO

from umt.textsafe import printable

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: An error line is cut to this many characters.
MAX_MESSAGE_CHARS = 1000

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 the operation failed or conflicts (database or qBittorrent "
    "unreachable, idempotency conflict, run already finished, run failed under --wait); "
    "2 invalid input or usage (bad source, malformed JSON, duration or signal name, unknown "
    "run id, bad configuration) - a bad input changes nothing."
)

_secrets: set[str] = set()


class CliError(Exception):
    """Ends a command with ``message`` on stderr and exit ``code`` (see ``Application.abort``)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def add_secret(value: str | None) -> None:
    """A value (password, database URL) that must never appear in an error message."""
    if value and len(value) >= 4:
        _secrets.add(value)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    for secret in sorted(_secrets if secrets is None else set(secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _is_click_error(exc: BaseException) -> bool:
    # typer vendors Click: its exceptions are recognised by their shape, not their module
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


def _usage_message(exc: BaseException) -> str:
    message: str = exc.format_message()  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    return f"{message} (see '{ctx.command_path} --help')"


def classify(exc: BaseException) -> tuple[int, str | None]:
    """The exit code for ``exc`` and the one-line message to show (None: show nothing)."""
    # typer's exceptions exist only once typer is imported (the finish hook runs without it)
    typer = sys.modules.get("typer")
    if typer is not None and isinstance(exc, typer.Exit):
        return int(exc.exit_code), None
    if isinstance(exc, SystemExit):
        status = exc.code
        if isinstance(status, int) or not status:
            return status or EXIT_OK, None
        return EXIT_FAILED, str(status)  # SystemExit("why"): Python itself would print why
    if isinstance(exc, CliError):
        return exc.code, exc.message
    if isinstance(exc, KeyboardInterrupt) or (typer is not None and isinstance(exc, typer.Abort)):
        return EXIT_INTERRUPTED, "interrupted"
    if _is_click_error(exc):
        code: int = exc.exit_code  # type: ignore[attr-defined]
        message: str = exc.format_message()  # type: ignore[attr-defined]
        return code, _usage_message(exc) if code == EXIT_USAGE else message
    declared = getattr(type(exc), "exit_code", None)
    if isinstance(exc, Exception) and declared in (EXIT_FAILED, EXIT_USAGE):
        return int(declared), str(exc)
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return EXIT_FAILED, f"{exc.strerror or exc}{where}"
    detail = str(exc) or "no details"
    return EXIT_FAILED, (
        f"unexpected {type(exc).__name__}: {detail} (set UMT_DEBUG=1 to see where it happened)"
    )


def handle(exc: BaseException, stderr: IO[str] | None = None) -> int:
    """Report ``exc`` on one line of stderr (a traceback too with UMT_DEBUG=1); its exit code."""
    stream = stderr or sys.stderr
    if type(exc).__name__ == "NoArgsIsHelpError":  # bare "umt": the help, as a usage error
        stream.write(exc.format_message() + "\n")  # type: ignore[attr-defined]
        return EXIT_USAGE
    code, message = classify(exc)
    if os.environ.get("UMT_DEBUG") == "1" and message is not None:
        stream.write(redact("".join(traceback.format_exception(exc))))
    if message is not None:
        line = printable(" ".join(redact(message).split()))
        if len(line) > MAX_MESSAGE_CHARS:  # an echoed argument can be megabytes long
            line = line[:MAX_MESSAGE_CHARS] + "…"
        stream.write(f"umt: error: {line}\n")
        stream.flush()
    return code
