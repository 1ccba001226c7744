"""Replay: recorded results come back, and code that no longer matches the record stops the run."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from tests.engine.conftest import Effects, drain
from umt.engine import Engine, RunStatus, Workflow


def _steps_then_gate(
    effects: Effects, plan: list[tuple[str, str]], *, gate: str = "gate", after: bool = True,
    compensate: Callable[[Any, Any], Any] | None = None,
) -> Workflow:
    """Version 1 of workflow "drifty": the steps of ``plan`` ((kind, name): kind is "step" or
    "sleep"), then a wait for the signal ``gate`` and, if ``after``, one more step."""

    def body_for(name: str) -> Callable[[Any], str]:
        def body(step: Any) -> str:
            effects.record(step)
            return f"{name}-result"

        return body

    def run(ctx: Any, _: Any) -> Any:
        results = []
        for kind, name in plan:
            if kind == "step":
                results.append(ctx.step(name, body_for(name)))
            else:
                ctx.sleep(name, "0s")
        ctx.wait_for_signal("gate", gate)
        if after:
            results.append(ctx.step("after", body_for("after")))
        return results

    return Workflow("drifty", "1", run, compensate=compensate)


def _park_at_gate(engine: Engine, workflow: Workflow) -> str:
    run = engine.start(workflow).run
    drain(engine, [workflow])
    assert engine.get(run.id).status == RunStatus.WAITING
    return run.id


def _open_gate(engine: Engine, run_id: str, gate: str = "gate") -> None:
    result = engine.signal(gate, "open", run_id=run_id)
    assert result.delivered_to == (run_id,)


# ---------------------------------------------------------------------------- replay


def test_completed_steps_return_their_recorded_results(engine: Engine, effects: Effects) -> None:
    calls: list[str] = []

    def first(step: Any) -> dict[str, Any]:
        calls.append("first")
        effects.record(step)
        return {"n": len(calls), "tuple": (1, 2)}  # JSON turns the tuple into a list

    def run(ctx: Any, _: Any) -> Any:
        value = ctx.step("first", first)
        ctx.wait_for_signal("gate", "gate")
        return ctx.step("second", lambda step: {"seen": value})

    workflow = Workflow("replayed", "1", run)
    run_id = _park_at_gate(engine, workflow)
    _open_gate(engine, run_id)
    drain(engine, [workflow])

    done = engine.get(run_id)
    assert done.status == RunStatus.SUCCEEDED
    assert calls == ["first"]  # replayed, not executed again
    assert effects.count(run_id, "first") == 1
    # the first execution saw the JSON form too, so both executions saw the same value
    assert done.output == {"seen": {"n": 1, "tuple": [1, 2]}}


class Found(BaseModel):
    title: str
    size: int


def test_recorded_results_are_validated_into_the_result_type(engine: Engine) -> None:
    seen: list[Any] = []

    def run(ctx: Any, _: Any) -> Any:
        found = ctx.step("find", lambda step: Found(title="x", size=3), result_type=Found)
        seen.append(found)
        ctx.wait_for_signal("gate", "gate")
        return found.size

    workflow = Workflow("typed", "1", run)
    run_id = _park_at_gate(engine, workflow)
    _open_gate(engine, run_id)
    drain(engine, [workflow])

    assert engine.get(run_id).output == 3
    assert seen == [Found(title="x", size=3)] * 2
    assert all(type(value) is Found for value in seen)
    assert engine.steps(run_id)[0].result == {"title": "x", "size": 3}


def test_repeated_step_names_are_numbered(engine: Engine, effects: Effects) -> None:
    def run(ctx: Any, _: Any) -> Any:
        values = [ctx.step("poll", lambda step, i=i: i) for i in range(3)]
        ctx.wait_for_signal("gate", "gate")
        values.append(ctx.step("poll", lambda step: 3))
        return values

    workflow = Workflow("repeats", "1", run)
    run_id = _park_at_gate(engine, workflow)
    _open_gate(engine, run_id)
    drain(engine, [workflow])

    assert engine.get(run_id).output == [0, 1, 2, 3]
    assert [s.name for s in engine.steps(run_id)] == ["poll", "poll#2", "poll#3", "gate", "poll#4"]


def test_a_step_name_with_the_counter_mark_is_refused(engine: Engine) -> None:
    workflow = Workflow("hash", "1", lambda ctx, _: ctx.step("poll#2", lambda step: 1))
    run = engine.start(workflow).run
    drain(engine, [workflow])
    failed = engine.get(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and "poll#2" in failed.error["message"]


# ---------------------------------------------------------------------------- drift


DRIFTS = {
    # name: (recorded plan, new plan, position, recorded name, new name)
    "rename": (
        [("step", "a"), ("step", "b")],
        [("step", "a"), ("step", "b2")],
        1, "b", "b2",
    ),
    "insert": (
        [("step", "a"), ("step", "b")],
        [("step", "a"), ("step", "inserted"), ("step", "b")],
        1, "b", "inserted",
    ),
    "removal": (
        [("step", "a"), ("step", "b"), ("step", "c")],
        [("step", "a"), ("step", "c")],
        1, "b", "c",
    ),
    "step-became-sleep": (
        [("step", "a"), ("step", "b")],
        [("step", "a"), ("sleep", "b")],
        1, "b (step)", "b (sleep)",
    ),
    "one-repeat-less": (
        [("step", "a"), ("step", "a"), ("step", "b")],
        [("step", "a"), ("step", "b")],
        1, "a#2", "b",
    ),
}


@pytest.mark.parametrize("change", sorted(DRIFTS))
def test_code_that_no_longer_matches_the_record_stops_the_run(
    engine: Engine, effects: Effects, change: str
) -> None:
    recorded_plan, new_plan, position, recorded_name, new_name = DRIFTS[change]
    compensations: list[str] = []
    undo = lambda ctx, _: compensations.append("ran")  # noqa: E731
    old = _steps_then_gate(effects, recorded_plan, compensate=undo)
    run_id = _park_at_gate(engine, old)
    steps_before = engine.steps(run_id)
    attempts_before = engine.attempts(run_id)
    effects_before = effects.rows(run_id)
    assert len(effects_before) == len(recorded_plan)

    # the same name and version, changed code: a deploy without a version bump
    new = _steps_then_gate(effects, new_plan, compensate=undo)
    _open_gate(engine, run_id)
    drain(engine, [new])

    failed = engine.get(run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None
    assert failed.error["type"] == "ReplayDrift"
    message = failed.error["message"]
    assert f"step {position}" in message
    assert repr(recorded_name) in message
    assert repr(new_name) in message
    # nothing executed again, nothing skipped ahead, nothing new recorded
    assert effects.rows(run_id) == effects_before
    assert engine.attempts(run_id) == attempts_before
    assert [(s.name, s.kind) for s in engine.steps(run_id)] == [
        (s.name, s.kind) for s in steps_before
    ]
    # a drifted run is a code problem: no compensation
    assert failed.compensation is None
    assert compensations == []
    assert not [s for s in engine.steps(run_id) if s.phase == "compensation"]


def test_a_recorded_step_the_code_no_longer_reaches_is_drift(
    engine: Engine, effects: Effects
) -> None:
    old = _steps_then_gate(effects, [("step", "a"), ("step", "b")])
    run_id = _park_at_gate(engine, old)
    _open_gate(engine, run_id)

    def shorter(ctx: Any, _: Any) -> Any:
        return ctx.step("a", lambda step: "never runs")  # returns before "b" and the gate

    drain(engine, [Workflow("drifty", "1", shorter)])

    failed = engine.get(run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error["type"] == "ReplayDrift"
    assert "step 1" in failed.error["message"] and "'b'" in failed.error["message"]
    assert failed.output is None
    assert effects.count(run_id) == 2


def test_a_changed_signal_name_is_drift(engine: Engine, effects: Effects) -> None:
    old = _steps_then_gate(effects, [("step", "a")], gate="gate-one")
    run_id = _park_at_gate(engine, old)
    _open_gate(engine, run_id, "gate-one")

    new = _steps_then_gate(effects, [("step", "a")], gate="gate-two")
    drain(engine, [new])

    failed = engine.get(run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error["type"] == "ReplayDrift"
    assert "gate-one" in failed.error["message"] and "gate-two" in failed.error["message"]
    assert effects.count(run_id, "after") == 0


def test_unchanged_code_replays_to_the_end(engine: Engine, effects: Effects) -> None:
    plan = [("step", "a"), ("sleep", "pause"), ("step", "a"), ("step", "b")]
    run_id = _park_at_gate(engine, _steps_then_gate(effects, plan))
    _open_gate(engine, run_id)
    drain(engine, [_steps_then_gate(effects, plan)])  # equal code, new objects

    done = engine.get(run_id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == ["a-result", "a-result", "b-result", "after-result"]
    assert [row["step"] for row in effects.rows(run_id)] == ["a", "a#2", "b", "after"]


def test_drift_cannot_be_swallowed_by_the_workflow_code(
    engine: Engine, effects: Effects
) -> None:
    """Workflow code that catches every exception around a step still stops at drift."""
    old = _steps_then_gate(effects, [("step", "a")])
    run_id = _park_at_gate(engine, old)
    _open_gate(engine, run_id)

    def careless(ctx: Any, _: Any) -> Any:
        with contextlib.suppress(Exception):  # e.g. meant for StepFailed
            ctx.step("a-renamed", lambda step: effects.record(step))
        ctx.wait_for_signal("gate", "gate")
        return ctx.step("after", lambda step: effects.record(step))

    drain(engine, [Workflow("drifty", "1", careless)])

    failed = engine.get(run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error["type"] == "ReplayDrift"
    assert "'a-renamed'" in failed.error["message"]
    assert [row["step"] for row in effects.rows(run_id)] == ["a"]


def test_drift_swallowed_then_another_error_still_fails_as_drift(
    engine: Engine, effects: Effects
) -> None:
    compensations: list[str] = []
    old = _steps_then_gate(effects, [("step", "a")],
                           compensate=lambda ctx, _: compensations.append("ran"))
    run_id = _park_at_gate(engine, old)
    _open_gate(engine, run_id)

    def careless(ctx: Any, _: Any) -> Any:
        try:
            ctx.step("a-renamed", lambda step: "x")
        except Exception as exc:
            raise RuntimeError("something else went wrong") from exc

    drain(engine, [Workflow("drifty", "1", careless,
                            compensate=lambda ctx, _: compensations.append("ran"))])

    failed = engine.get(run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error["type"] == "ReplayDrift"
    assert compensations == []
