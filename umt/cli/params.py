"""Options shared by several commands, and validation of what users type."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Annotated, Any

import typer

from umt.cli.errors import EXIT_USAGE, CliError

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON on stdout (for scripts).")
]

#: The values of umt.engine.RunStatus, spelled out: help must not load the engine
#: (tests/cli/test_statuses.py checks that they are the same).
RUN_STATUSES = ("pending", "running", "waiting", "sleeping", "succeeded", "failed", "canceled")


def parse_duration_option(text: str, option: str) -> timedelta:
    from umt.engine import InvalidDuration, parse_duration

    try:
        return parse_duration(text)
    except InvalidDuration as exc:
        raise CliError(f"{option}: {exc}", EXIT_USAGE) from None


def check_run_id(text: str) -> str:
    """A run id in its canonical form; a malformed one is a usage error (exit 2)."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise CliError(
            f"{text!r} is not a run id (ids look like 0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90;"
            " list them with 'umt runs')",
            EXIT_USAGE,
        ) from None


def parse_json_option(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option}: not valid JSON ({exc})", EXIT_USAGE) from None


def check_status(text: str | None) -> str | None:
    if text is not None and text not in RUN_STATUSES:
        raise CliError(
            f"--status: unknown status {text!r}; use one of {', '.join(RUN_STATUSES)}",
            EXIT_USAGE,
        )
    return text
