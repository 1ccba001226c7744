"""Run, step and attempt statuses are the engine's enums end to end; users see their values."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from umt.cli.params import RUN_STATUSES, check_status
from umt.cli.render import STATUS_STYLES, status_text
from umt.engine import AttemptStatus, RunStatus, StepStatus


@dataclass(frozen=True)
class _Shown:
    status: RunStatus


def test_the_cli_choices_are_the_run_statuses() -> None:
    assert tuple(RunStatus) == RUN_STATUSES
    assert check_status("waiting") == RunStatus.WAITING


def test_every_status_has_a_style_and_shows_its_value() -> None:
    statuses = {*RunStatus, *StepStatus, *AttemptStatus}
    assert set(STATUS_STYLES) == statuses
    for status in statuses:
        text = status_text(status)
        assert text.plain == status.value
        assert text.style == STATUS_STYLES[status.value]


def test_json_shows_the_value() -> None:
    assert json.dumps({"status": StepStatus.TIMED_OUT}) == '{"status": "timed_out"}'
    assert json.dumps(asdict(_Shown(RunStatus.SUCCEEDED))) == '{"status": "succeeded"}'
