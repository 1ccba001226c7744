"""A step without business statements commits its result with the execution's next operation
(the next step's start, a sleep, a signal wait, the run's end or failure): every way out of
workflow code after such a step still records it."""

from __future__ import annotations

from typing import Any

from tests.engine.conftest import drain, settled
from umt.engine import Engine, RunStatus, Workflow, WorkflowContext


def _steps(engine: Engine, run_id: str) -> list[tuple[str, str, Any]]:
    return [(s.name, s.status, s.result) for s in engine.steps(run_id)]


def _attempts(engine: Engine, run_id: str) -> list[tuple[str, str]]:
    return [(a.step_name, a.status) for a in engine.attempts(run_id)]


def test_consecutive_steps_and_the_run_end_record_every_result(engine: Engine) -> None:
    def run(ctx: WorkflowContext, _: Any) -> Any:
        def tens(n: int) -> Any:
            return lambda step: n * 10

        return [ctx.step(f"s{n}", tens(n)) for n in range(3)]

    workflow = Workflow("three", "1", run)
    started = engine.start(workflow).run
    drain(engine, [workflow])

    done = settled(engine, started.id)
    assert (done.status, done.output) == (RunStatus.SUCCEEDED, [0, 10, 20])
    assert _steps(engine, started.id) == [
        ("s0", "succeeded", 0), ("s1", "succeeded", 10), ("s2", "succeeded", 20)]
    assert _attempts(engine, started.id) == [
        ("s0", "succeeded"), ("s1", "succeeded"), ("s2", "succeeded")]


def test_a_step_before_a_sleep_or_a_signal_wait_is_recorded_before_the_run_parks(
    engine: Engine
) -> None:
    def sleeper(ctx: WorkflowContext, _: Any) -> None:
        ctx.step("before", lambda step: "slept")
        ctx.sleep("nap", "1h")

    def waiter(ctx: WorkflowContext, _: Any) -> None:
        ctx.step("before", lambda step: "waited")
        ctx.wait_for_signal("wait", "never")

    workflows = [Workflow("sleeper", "1", sleeper), Workflow("waiter", "1", waiter)]
    runs = [engine.start(workflow).run for workflow in workflows]
    drain(engine, workflows)

    for run, status, result in zip(runs, [RunStatus.SLEEPING, RunStatus.WAITING],
                                   ["slept", "waited"], strict=True):
        assert engine.get(run.id).status == status
        assert _steps(engine, run.id)[0] == ("before", "succeeded", result)
        assert _attempts(engine, run.id) == [("before", "succeeded")]


def test_a_run_that_fails_after_a_step_records_it_and_compensation_sees_it(
    engine: Engine
) -> None:
    seen: list[dict[str, Any]] = []

    def run(ctx: WorkflowContext, _: Any) -> None:
        ctx.step("submit", lambda step: "torrent-1")
        raise ValueError("the workflow code gave up")

    def compensate(ctx: WorkflowContext, _: Any) -> None:
        seen.append(ctx.main_results)

    workflow = Workflow("gives-up", "1", run, compensate=compensate)
    started = engine.start(workflow).run
    drain(engine, [workflow])

    done = settled(engine, started.id)
    assert done.status == RunStatus.FAILED and done.compensation == "succeeded"
    assert _steps(engine, started.id) == [("submit", "succeeded", "torrent-1")]
    assert _attempts(engine, started.id) == [("submit", "succeeded")]
    assert seen == [{"submit": "torrent-1"}]
