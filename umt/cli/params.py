"""Options shared by several commands, and validation of what users type."""

from __future__ import annotations

import json
import math
import unicodedata
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from umt.cli.errors import EXIT_USAGE, CliError

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON on stdout (for scripts).")
]
VerboseOption = Annotated[
    int, typer.Option("--verbose", "-v", count=True, show_default=False,
                      help="Log more: -v adds the next level of detail, -vv the one after.")
]
QuietOption = Annotated[
    int, typer.Option("--quiet", "-q", count=True, show_default=False,
                      help="Log less: -q leaves out one level, -qq two.")
]
LogFileOption = Annotated[
    Path | None,
    typer.Option("--log-file", metavar="PATH", show_default=False,
                 help="Append the log lines to PATH instead of stderr (its folder must exist)."),
]

#: The values of umt.engine.RunStatus, spelled out: help must not load the engine
#: (tests/cli/test_statuses.py checks that they are the same).
RUN_STATUSES = ("pending", "running", "waiting", "sleeping", "succeeded", "failed", "canceled")

#: The documented bounds of what users type (README, "Limits").
MAX_LIST_LIMIT = 10_000
MAX_KEY_CHARS = 200
MAX_TITLE_BYTES = 1024
MAX_JSON_BYTES = 64 * 1024
MAX_JSON_DEPTH = 32
#: JSON numbers must fit a 64-bit integer or a finite double on both backends.
_INT64 = 2**63
_MAX_FRACTION = 1e15


def parse_duration_option(text: str, option: str) -> timedelta:
    from umt.engine import InvalidDuration, parse_duration

    try:
        return parse_duration(text)
    except InvalidDuration as exc:
        raise CliError(f"{option}: {exc}", EXIT_USAGE) from None


def parse_bounded_duration(text: str, option: str, limit: timedelta) -> timedelta:
    duration = parse_duration_option(text, option)
    if duration > limit:
        raise CliError(f"{option}: at most {limit.days} days", EXIT_USAGE)
    return duration


def check_run_id(text: str) -> str:
    """A run id in its canonical form; a malformed one is a usage error (exit 2)."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        shown = text if len(text) <= 60 else text[:60] + "…"
        raise CliError(
            f"{shown!r} is not a run id (ids look like 0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90;"
            " list them with 'umt runs')",
            EXIT_USAGE,
        ) from None


def parse_json_option(text: str, option: str) -> Any:
    """A JSON value both databases store alike: bounded in size and depth, no NaN or
    infinity, integers within 64 bits, no NUL character in any string."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_JSON_BYTES:
        raise CliError(f"{option}: longer than {MAX_JSON_BYTES} bytes", EXIT_USAGE)
    if _nesting(text) > MAX_JSON_DEPTH:
        raise CliError(f"{option}: nested deeper than {MAX_JSON_DEPTH} levels", EXIT_USAGE)
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise CliError(f"{option}: not valid JSON ({exc})", EXIT_USAGE) from None
    problem = _unrepresentable(value)
    if problem:
        raise CliError(f"{option}: {problem}", EXIT_USAGE)
    return value


def _nesting(text: str) -> int:
    """How deep brackets nest, counted without parsing (strings may hold brackets: an
    over-estimate only refuses absurd input, which is the point)."""
    depth = deepest = 0
    for character in text:
        if character in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif character in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unrepresentable(value: Any) -> str | None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "a number too large for a double"
        if isinstance(item, float) and abs(item) >= _MAX_FRACTION:
            # PostgreSQL's jsonb gives 1e16 back as 10000000000000000, an integer: the same
            # signal sent twice would no longer compare equal there.
            return "a fractional number beyond 1e15 (write it as an integer)"
        if isinstance(item, int) and not isinstance(item, bool) and not -_INT64 <= item < _INT64:
            return "an integer beyond 64 bits"
        if isinstance(item, str) and "\0" in item:
            return "a string with a NUL character"
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def check_key(text: str | None, option: str) -> str | None:
    """An idempotency key: 1 to 200 printable characters."""
    if text is None:
        return None
    if not text:
        raise CliError(f"{option} must not be empty", EXIT_USAGE)
    if len(text) > MAX_KEY_CHARS:
        raise CliError(f"{option}: longer than {MAX_KEY_CHARS} characters", EXIT_USAGE)
    if not text.isprintable():
        raise CliError(f"{option}: must not contain control characters", EXIT_USAGE)
    return text


def check_title(text: str | None, option: str) -> str | None:
    """A title typed by the user: up to 1024 bytes, no control characters."""
    if text is None:
        return None
    if not text.strip():
        raise CliError(f"{option} must not be empty", EXIT_USAGE)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TITLE_BYTES:
        raise CliError(f"{option}: longer than {MAX_TITLE_BYTES} bytes", EXIT_USAGE)
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        raise CliError(f"{option}: must not contain control characters", EXIT_USAGE)
    return text


def not_utf8(args: list[str]) -> int | None:
    """The position (from 1) of the first argument that is not valid UTF-8, if any."""
    for position, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return position
    return None


def check_status(text: str | None) -> str | None:
    if text is not None and text not in RUN_STATUSES:
        raise CliError(
            f"--status: unknown status {text!r}; use one of {', '.join(RUN_STATUSES)}",
            EXIT_USAGE,
        )
    return text
