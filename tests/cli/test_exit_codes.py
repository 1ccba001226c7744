"""Each error class says its own exit code; the CLI keeps no table of class names."""

from __future__ import annotations

import pytest

from umt.cli.errors import EXIT_FAILED, EXIT_USAGE, classify
from umt.config import ConfigError
from umt.engine import (
    IdempotencyConflict,
    InvalidDuration,
    InvalidSignalName,
    RunFinished,
    StoreUnavailable,
    UnknownRun,
)
from umt.media.qbittorrent import QbtAuthFailed, QbtUnavailable
from umt.media.sources import InvalidSource


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("bad setting"), EXIT_USAGE),
        (InvalidSource("bad source"), EXIT_USAGE),
        (InvalidDuration("bad duration"), EXIT_USAGE),
        (InvalidSignalName("bad name"), EXIT_USAGE),
        (UnknownRun("0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90"), EXIT_USAGE),
        (StoreUnavailable("database down"), EXIT_FAILED),
        (IdempotencyConflict("acquire", "k", "r"), EXIT_FAILED),
        (RunFinished("r", "succeeded", "cancel"), EXIT_FAILED),
        (QbtUnavailable("qBittorrent down"), EXIT_FAILED),
        (QbtAuthFailed("bad password"), EXIT_FAILED),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_an_error_class_carries_its_exit_code(error: Exception, code: int) -> None:
    assert classify(error) == (code, str(error))


def test_an_error_without_one_is_unexpected() -> None:
    code, message = classify(ZeroDivisionError("boom"))
    assert code == EXIT_FAILED and message is not None and message.startswith("unexpected ")


def test_a_system_exit_keeps_its_code_and_its_message() -> None:
    assert classify(SystemExit(2)) == (2, None)
    assert classify(SystemExit(0)) == (0, None)
    assert classify(SystemExit(None)) == (0, None)
    # as Python does: a message is printed and the exit code is 1
    assert classify(SystemExit("a plug-in refused to load")) == (
        EXIT_FAILED, "a plug-in refused to load")
