"""Durable sleep: the run holds nothing while it sleeps, survives restarts and wakes once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import (
    FAST,
    Effects,
    WorkerThread,
    drain,
    wait_for_status,
    wait_until,
)
from umt.engine import (
    Engine,
    FakeClock,
    InvalidDuration,
    RunStatus,
    StepContext,
    WorkerOptions,
    Workflow,
    WorkflowContext,
    open_database,
)


def _napper(effects: Effects, duration: str) -> Workflow:
    def record(step: StepContext) -> str:
        effects.record(step)
        return step.step_name

    def run(ctx: WorkflowContext, _: Any) -> Any:
        ctx.step("before", record)
        ctx.sleep("retention", duration)
        return ctx.step("cleanup", record)

    return Workflow("napper", "1", run)


def test_a_sleep_fires_once_at_its_time(
    clocked: Engine, clock: FakeClock, effects: Effects
) -> None:
    workflow = _napper(effects, "7d")
    run = clocked.start(workflow).run
    drain(clocked, [workflow])

    sleeping = clocked.get(run.id)
    assert sleeping.status == RunStatus.SLEEPING
    assert sleeping.lease_owner is None
    assert sleeping.due_at == clock.now() + timedelta(days=7)
    [_, nap] = clocked.steps(run.id)
    assert (nap.name, nap.kind, nap.status) == ("retention", "sleep", "sleeping")
    assert nap.wake_at == sleeping.due_at

    clock.advance(timedelta(days=7) - timedelta(seconds=1))
    assert drain(clocked, [workflow]).executed == 0
    assert clocked.get(run.id).status == RunStatus.SLEEPING

    clock.advance(timedelta(seconds=1))
    assert drain(clocked, [workflow]).executed == 1
    done = clocked.get(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert [s.status for s in clocked.steps(run.id)] == ["succeeded"] * 3
    assert [row["step"] for row in effects.rows(run.id)] == ["before", "cleanup"]

    clock.advance(timedelta(days=30))
    assert drain(clocked, [workflow]).executed == 0
    assert effects.count(run.id) == 2


def test_a_fired_timer_is_recorded_with_what_follows_it(
    clocked: Engine, clock: FakeClock
) -> None:
    """A timer's end commits with the execution's next operation: another timer, a step, the
    run's end. Each sleep ends succeeded when it fired, with no result."""
    def run(ctx: WorkflowContext, _: Any) -> Any:
        ctx.sleep("one", "1h")
        ctx.sleep("two", "1h")
        ctx.step("work", lambda step: "worked")
        ctx.sleep("three", "1h")
        return "done"

    workflow = Workflow("timers", "1", run)
    run_id = clocked.start(workflow).run.id
    fired = []
    for _ in range(3):
        drain(clocked, [workflow])
        assert clocked.get(run_id).status == RunStatus.SLEEPING
        clock.advance(timedelta(hours=1))
        fired.append(clock.now())
    drain(clocked, [workflow])

    assert clocked.get(run_id).output == "done"
    steps = clocked.steps(run_id)
    assert [(s.name, s.status) for s in steps] == [
        ("one", "succeeded"), ("two", "succeeded"), ("work", "succeeded"),
        ("three", "succeeded"),
    ]
    sleeps = [s for s in steps if s.kind == "sleep"]
    assert [s.finished_at for s in sleeps] == fired
    assert [s.result for s in sleeps] == [None, None, None]


def test_the_step_before_a_sleep_is_recorded_when_the_run_parks(
    clocked: Engine, clock: FakeClock
) -> None:
    """The step's result commits with the timer that parks the run, and counts on replay."""
    bodies: list[str] = []

    def run(ctx: WorkflowContext, _: Any) -> Any:
        before = ctx.step("before", lambda step: bodies.append("before") or "kept")
        ctx.sleep("nap", "1h")
        return before

    workflow = Workflow("step-then-sleep", "1", run)
    run_id = clocked.start(workflow).run.id
    drain(clocked, [workflow])
    assert clocked.get(run_id).status == RunStatus.SLEEPING
    [before, nap] = clocked.steps(run_id)
    assert (before.name, before.status, before.result) == ("before", "succeeded", "kept")
    assert [(a.step_name, a.status) for a in clocked.attempts(run_id)] == [
        ("before", "succeeded")]
    assert (nap.name, nap.status) == ("nap", "sleeping")

    clock.advance(timedelta(hours=1))
    drain(clocked, [workflow])
    assert clocked.get(run_id).output == "kept"
    assert bodies == ["before"]


def test_a_sleep_survives_closing_the_database(
    engine: Engine, clock: FakeClock, db_url: str, effects: Effects
) -> None:
    workflow = _napper(effects, "1h")
    first = Engine(open_database(db_url), clock=clock)
    run = first.start(workflow).run
    drain(first, [workflow])
    first.close()

    clock.advance(timedelta(hours=2))
    second = Engine(open_database(db_url), clock=clock)
    try:
        drain(second, [workflow])
        assert second.get(run.id).status == RunStatus.SUCCEEDED
    finally:
        second.close()
    assert effects.count(run.id) == 2


@pytest.mark.parametrize("duration", ["0s", "0", "PT0S"])
def test_a_zero_sleep_does_not_park(engine: Engine, effects: Effects, duration: str) -> None:
    workflow = _napper(effects, duration)
    run = engine.start(workflow).run
    report = drain(engine, [workflow])

    done = engine.get(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert report.executed == 1 and done.lease_epoch == 1  # one claim, no wake-up
    assert [(s.name, s.status) for s in engine.steps(run.id)] == [
        ("before", "succeeded"), ("retention", "succeeded"), ("cleanup", "succeeded"),
    ]
    assert effects.count(run.id) == 2


def test_an_invalid_duration_fails_the_run(engine: Engine, effects: Effects) -> None:
    workflow = _napper(effects, "a while")
    run = engine.start(workflow).run
    drain(engine, [workflow])
    failed = engine.get(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error["type"] == InvalidDuration.__name__


def test_a_worker_wakes_for_a_due_timer_on_its_own(
    engine: Engine, effects: Effects
) -> None:
    """No notification announces a timer: the worker's idle wait ends at the next due time
    (the poll is a minute here)."""
    workflow = _napper(effects, "1s")
    options = WorkerOptions(lease=FAST.lease, poll_interval=timedelta(minutes=1),
                            grace_period=FAST.grace_period)
    worker = WorkerThread(engine.worker([workflow], options)).start()
    try:
        run = engine.start(workflow).run
        done = wait_for_status(engine, run.id, RunStatus.SUCCEEDED, timeout=30)
    finally:
        worker.stop()
    assert effects.count(run.id) == 2
    # The run slept (read from its record, not caught in the act: a 1 s sleep can pass between
    # two looks on a busy machine) and was woken well before the one-minute poll.
    sleep = next(step for step in engine.steps(run.id) if step.name == "retention")
    assert (sleep.kind, sleep.status) == ("sleep", "succeeded")
    assert done.finished_at is not None and done.started_at is not None
    assert done.finished_at - done.started_at < options.poll_interval


def test_sleeping_runs_hold_no_worker_slot(engine: Engine, effects: Effects) -> None:
    sleepy = _napper(effects, "1h")
    quick = Workflow("quick", "1", lambda ctx, _: ctx.step("only", lambda step: "done"))
    options = WorkerOptions(concurrency=1, lease=FAST.lease, poll_interval=FAST.poll_interval,
                            grace_period=FAST.grace_period)
    worker = WorkerThread(engine.worker([sleepy, quick], options)).start()
    try:
        sleepers = [engine.start(sleepy, n).run for n in range(3)]
        for run in sleepers:
            wait_for_status(engine, run.id, RunStatus.SLEEPING)
        # The status commits before the execution thread lets go of its slot: wait for that.
        wait_until(lambda: worker.worker.in_flight == 0, message="no execution in flight")
        after = engine.start(quick).run
        wait_for_status(engine, after.id, RunStatus.SUCCEEDED)
    finally:
        worker.stop()
