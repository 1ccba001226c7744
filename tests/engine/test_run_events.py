"""The engine logs one line per run event: claimed, step started/finished/failed, sleeping,
waiting, succeeded, failed, canceled, released (what ``umt worker`` and ``umt resume`` show)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import FAST, WorkerThread, drain, wait_for_status, wait_until
from umt.engine import (
    Engine,
    FakeClock,
    PermanentError,
    StepContext,
    Workflow,
    WorkflowContext,
)


def _events(caplog: pytest.LogCaptureFixture, run_id: str) -> list[tuple[int, str]]:
    prefix = f"run {run_id}"
    return [(record.levelno, record.getMessage().removeprefix(prefix))
            for record in caplog.records if record.getMessage().startswith(prefix)]


def _ok(step: StepContext) -> str:
    return step.step_name


def _refuse(step: StepContext) -> str:
    raise PermanentError("no such torrent")


def _napper(ctx: WorkflowContext, _: Any) -> Any:
    ctx.step("fetch", _ok)
    ctx.sleep("retention", "1h")
    ctx.wait_for_signal("wait-done", "done", timeout="2h")
    return ctx.step("clean", _ok)


def test_a_run_logs_its_claims_steps_sleep_wait_and_success(
    clocked: Engine, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="umt.engine")
    workflow = Workflow("events", "1", _napper)
    run_id = clocked.start(workflow).run.id
    drain(clocked, [workflow])
    clock.advance(timedelta(hours=1, seconds=1))
    drain(clocked, [workflow])
    clocked.signal("done")
    drain(clocked, [workflow])
    claimed = (logging.INFO, ": claimed (events 1, main phase, lease epoch 1)")
    events = _events(caplog, run_id)
    assert events[:4] == [
        claimed,
        (logging.DEBUG, ": step fetch started (attempt 1)"),
        (logging.DEBUG, ": step fetch finished (attempt 1)"),
        (logging.INFO, f": sleeping in retention until {events[3][1].split(' until ')[1]}"),
    ]
    assert events[4][1].startswith(": claimed (events 1, main phase, lease epoch 2)")
    assert events[5][1].startswith(": waiting in wait-done for signal done until ")
    assert [message for _, message in events[6:]] == [
        ": claimed (events 1, main phase, lease epoch 3)",
        ": step clean started (attempt 1)",
        ": step clean finished (attempt 1)",
        ": succeeded",
    ]


def test_a_failing_step_logs_the_attempt_and_the_run_failing(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="umt.engine")
    workflow = Workflow("refused", "1", lambda ctx, _: ctx.step("submit", _refuse))
    run_id = engine.start(workflow).run.id
    drain(engine, [workflow])
    assert _events(caplog, run_id) == [
        (logging.INFO, ": claimed (refused 1, main phase, lease epoch 1)"),
        (logging.DEBUG, ": step submit started (attempt 1)"),
        (logging.INFO, " step submit attempt 1 failed: no such torrent"),
        (logging.WARNING, " failed: step 'submit' failed after 1 attempt(s): no such torrent"),
    ]


def _patient(step: StepContext) -> str:
    while True:  # long work, checked between chunks
        step.sleep(0.05)


@pytest.mark.parametrize("ending", ["stop", "cancel"])
def test_a_run_in_flight_logs_its_release_or_its_cancellation(
    engine: Engine, caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    caplog.set_level(logging.INFO, logger="umt.engine")
    workflow = Workflow("patient", "1", lambda ctx, _: ctx.step("copy", _patient))
    run_id = engine.start(workflow).run.id
    worker = WorkerThread(engine.worker([workflow], FAST)).start()
    try:
        wait_for_status(engine, run_id, "running")
        wait_until(lambda: any(": claimed" in m for _, m in _events(caplog, run_id)) or None)
        if ending == "cancel":
            engine.cancel(run_id)
            wait_until(lambda: any("canceled" in m for _, m in _events(caplog, run_id)) or None)
    finally:
        worker.stop()
    events = [message for level, message in _events(caplog, run_id) if level == logging.INFO]
    assert events[0] == ": claimed (patient 1, main phase, lease epoch 1)"
    if ending == "stop":
        released = ": released (the worker is stopping; another execution continues it)"
        assert events[-1] == released and events.count(released) == 1
        assert engine.get(run_id).status == "pending"
    else:
        assert " was canceled during execution" in events
