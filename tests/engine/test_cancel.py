"""Cancel: parked runs stop at once, a running step is told, compensation runs exactly once."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import FAST, Effects, drain, settled, wait_until
from umt.engine import (
    NO_RETRY,
    Engine,
    PermanentError,
    RunFinished,
    RunStatus,
    StepContext,
    Workflow,
    WorkflowContext,
)


class Acquire:
    """A workflow shaped like acquire: a step, a parking point, a long chunked step, a last
    step; its compensation undoes the first step. Every body writes to ``effects``."""

    def __init__(self, effects: Effects, park: str = "none", chunks: int = 600) -> None:
        self.effects = effects
        self.park = park
        self.chunks = chunks
        self.long_started = threading.Event()
        self.long_stopped_at: float | None = None
        self.chunks_copied = 0
        self.long_stopped_by: BaseException | None = None
        self.seen_by_compensation: list[tuple[str, dict[str, Any]]] = []
        self.workflow = Workflow("acquire-like", "1", self.run, compensate=self.compensate)

    def run(self, ctx: WorkflowContext, _: Any) -> Any:
        ctx.step("submit", self.submit)
        if self.park == "sleep":
            ctx.sleep("retention", "1h")
        elif self.park == "signal":
            ctx.wait_for_signal("wait-download", "download-done")
        ctx.step("copy", self.copy)
        return ctx.step("register", self.record)

    def submit(self, step: StepContext) -> str:
        self.effects.record(step)
        return "torrent-1"

    def copy(self, step: StepContext) -> str:
        self.long_started.set()
        try:
            for chunk in range(self.chunks):  # 600 chunks of 50 ms: a 30-second copy
                step.check()
                time.sleep(0.05)
                self.chunks_copied = chunk + 1
                step.progress(chunk + 1, self.chunks)
        except BaseException as exc:
            self.long_stopped_at = time.monotonic()
            self.long_stopped_by = exc
            raise
        self.effects.record(step)
        return "copied"

    def record(self, step: StepContext) -> str:
        self.effects.record(step)
        return "registered"

    def compensate(self, ctx: WorkflowContext, _: Any) -> None:
        self.seen_by_compensation.append((ctx.run_status, ctx.main_results))

        def undo(step: StepContext) -> str:
            self.effects.record(step, note=str(ctx.main_results.get("submit")))
            return "removed"

        ctx.step("remove-torrent", undo)


def _steps(engine: Engine, run_id: str, phase: str = "main") -> dict[str, str]:
    return {s.name: s.status for s in engine.steps(run_id) if s.phase == phase}


@pytest.mark.parametrize("park", ["none", "sleep", "signal"])
def test_a_parked_run_is_canceled_at_once(engine: Engine, effects: Effects, park: str) -> None:
    acquire = Acquire(effects, park=park)
    run = engine.start(acquire.workflow).run
    if park != "none":
        drain(engine, [acquire.workflow])
        parked = {"sleep": RunStatus.SLEEPING, "signal": RunStatus.WAITING}[park]
        assert engine.get(run.id).status == parked

    canceled = engine.cancel(run.id)

    # no worker involved: the status is final now
    assert canceled.status == RunStatus.CANCELED
    assert engine.get(run.id).status == RunStatus.CANCELED
    assert engine.get(run.id).finished_at is not None
    if park != "none":
        assert _steps(engine, run.id) == {
            "submit": "succeeded",
            {"sleep": "retention", "signal": "wait-download"}[park]: "canceled",
        }
    with pytest.raises(RunFinished):
        engine.cancel(run.id)
    with pytest.raises(RunFinished, match="canceled"):
        engine.signal("download-done", run_id=run.id)

    drain(engine, [acquire.workflow])

    done = settled(engine, run.id)
    assert done.status == RunStatus.CANCELED
    assert done.compensation == "succeeded"
    assert effects.count(run.id, "copy") == 0 and effects.count(run.id, "register") == 0
    assert effects.count(run.id, "remove-torrent") == 1
    submitted = park != "none"
    assert acquire.seen_by_compensation == [
        ("canceled", {"submit": "torrent-1"} if submitted else {})
    ]
    # an untargeted signal does not reach it either
    assert engine.signal("download-done").delivered_to == ()


def test_a_running_step_that_checks_stops_and_compensation_runs_once(
    engine: Engine, effects: Effects, run_worker: Any
) -> None:
    acquire = Acquire(effects)
    run_worker([acquire.workflow])
    run = engine.start(acquire.workflow).run
    assert acquire.long_started.wait(20)
    wait_until(lambda: _steps(engine, run.id).get("copy") == "running")

    assert engine.cancel(run.id).status == RunStatus.CANCELED

    # Waits for the step to stop, however slow the machine: a step that never saw the cancel
    # would run its 600 chunks to the end instead.
    wait_until(lambda: acquire.long_stopped_at is not None, timeout=60,
               message="the copy step stopped")
    assert type(acquire.long_stopped_by).__name__ == "RunCanceled"
    assert acquire.chunks_copied < acquire.chunks, "the copy ran to its end"

    done = settled(engine, run.id)
    assert done.status == RunStatus.CANCELED
    assert done.compensation == "succeeded"
    assert _steps(engine, run.id) == {"submit": "succeeded", "copy": "canceled"}
    assert _steps(engine, run.id, "compensation") == {"remove-torrent": "succeeded"}
    copy_attempts = [a for a in engine.attempts(run.id) if a.step_name == "copy"]
    assert [a.status for a in copy_attempts] == ["canceled"]
    # no later step, the step's own write never committed, compensation exactly once
    assert [row["step"] for row in effects.rows(run.id)] == ["submit", "remove-torrent"]
    assert effects.rows(run.id)[1]["note"] == "torrent-1"
    assert acquire.seen_by_compensation == [("canceled", {"submit": "torrent-1"})]
    with pytest.raises(RunFinished):
        engine.signal("download-done", run_id=run.id)


def test_the_result_of_a_step_that_ignores_the_cancel_is_discarded(
    engine: Engine, effects: Effects, run_worker: Any
) -> None:
    inside = threading.Event()
    release = threading.Event()

    def stubborn(step: StepContext) -> str:
        inside.set()
        release.wait(20)  # never checks
        effects.record(step)  # buffered in the step's transaction: must not commit
        return "late result"

    def run(ctx: WorkflowContext, _: Any) -> Any:
        ctx.step("stubborn", stubborn)
        return ctx.step("next", lambda step: effects.record(step))

    workflow = Workflow("stubborn", "1", run)
    run_worker([workflow])
    started = engine.start(workflow).run
    assert inside.wait(20)
    engine.cancel(started.id)
    release.set()

    wait_until(lambda: [a.status for a in engine.attempts(started.id)] == ["canceled"],
               message="the attempt closed as canceled")
    canceled = engine.get(started.id)
    assert canceled.status == RunStatus.CANCELED and canceled.output is None
    [step] = engine.steps(started.id)
    assert (step.name, step.status, step.result) == ("stubborn", "canceled", None)
    assert effects.rows(started.id) == []


def test_a_run_that_fails_for_good_is_compensated_once(
    engine: Engine, effects: Effects
) -> None:
    seen: list[tuple[str, Any, dict[str, Any]]] = []

    def broken(step: StepContext) -> None:
        raise PermanentError("disk full")

    def run(ctx: WorkflowContext, _: Any) -> None:
        def submit(step: StepContext) -> str:
            effects.record(step)
            return "torrent-9"

        ctx.step("submit", submit)
        ctx.step("copy", broken, retry=NO_RETRY)

    def compensate(ctx: WorkflowContext, _: Any) -> None:
        seen.append((ctx.run_status, ctx.run_error, ctx.main_results))
        ctx.step("remove-torrent", lambda step: effects.record(step))

    workflow = Workflow("failing", "1", run, compensate=compensate)
    started = engine.start(workflow).run
    drain(engine, [workflow])

    done = settled(engine, started.id)
    assert done.status == RunStatus.FAILED
    assert done.compensation == "succeeded"
    assert done.error is not None and "disk full" in done.error["message"]
    assert effects.count(started.id, "remove-torrent") == 1
    assert len(seen) == 1
    status, error, results = seen[0]
    assert status == "failed" and error is not None and "disk full" in error["message"]
    assert results == {"submit": "torrent-9"}


def test_a_failing_compensation_is_recorded(engine: Engine) -> None:
    def compensate(ctx: WorkflowContext, _: Any) -> None:
        ctx.step("undo", lambda step: (_ for _ in ()).throw(PermanentError("undo failed")))

    def run(ctx: WorkflowContext, _: Any) -> Any:
        return ctx.wait_for_signal("wait", "never")

    workflow = Workflow("bad-undo", "1", run, compensate=compensate)
    started = engine.start(workflow).run
    drain(engine, [workflow])
    engine.cancel(started.id)
    drain(engine, [workflow])

    done = settled(engine, started.id)
    assert done.status == RunStatus.CANCELED
    assert done.compensation == "failed"
    assert done.error is not None and "undo failed" in str(done.error)


def test_compensation_cannot_park(engine: Engine) -> None:
    def compensate(ctx: WorkflowContext, _: Any) -> None:
        ctx.sleep("nap", "1h")

    workflow = Workflow("parking-undo", "1", lambda ctx, _: ctx.wait_for_signal("w", "never"),
                        compensate=compensate)
    started = engine.start(workflow).run
    drain(engine, [workflow])
    engine.cancel(started.id)
    drain(engine, [workflow])
    done = settled(engine, started.id)
    assert done.compensation == "failed"
    assert "compensation cannot sleep" in str(done.error)


def test_cancel_reaches_a_step_through_the_worker_without_waiting_for_a_lease(
    engine: Engine, effects: Effects, run_worker: Any
) -> None:
    """With a 10-minute lease, the heartbeat alone would not notice for minutes: the cancel
    must travel by notification (PostgreSQL) or the data_version poll (SQLite)."""
    from datetime import timedelta

    from umt.engine import WorkerOptions

    acquire = Acquire(effects)
    long_lease = WorkerOptions(lease=timedelta(minutes=10), poll_interval=FAST.poll_interval,
                               grace_period=FAST.grace_period)
    run_worker([acquire.workflow], long_lease)
    run = engine.start(acquire.workflow).run
    assert acquire.long_started.wait(20)
    engine.cancel(run.id)
    wait_until(lambda: acquire.long_stopped_at is not None, timeout=10,
               message="the copy step stopped")
    # compensation does not wait for the canceled lease to run out either
    assert settled(engine, run.id, timeout=20).compensation == "succeeded"
    assert effects.count(run.id, "remove-torrent") == 1


@pytest.mark.parametrize("compensable", [False, True])
def test_canceling_a_run_whose_worker_died_leaves_no_attempt_running(
    clocked: Engine, clock: Any, compensable: bool
) -> None:
    """The worker that held the step is gone (no heartbeat, no hand-back, nobody to close
    its attempt): the history must not show that attempt as running forever."""
    workflow = Workflow(
        "orphaned", "1", lambda ctx, _: ctx.step("copy", lambda step: "copied"),
        compensate=(lambda ctx, _: ctx.step("undo", lambda step: "undone")) if compensable
        else None,
    )
    run = clocked.start(workflow).run
    [claim] = clocked.store.claim(str(uuid.uuid4()), [workflow.key], limit=1,
                                  lease=timedelta(minutes=1))
    clocked.store.begin_step(claim.fence, 0, "copy")
    assert [a.status for a in clocked.attempts(run.id)] == ["running"]

    clocked.cancel(run.id)
    clock.advance(timedelta(minutes=2))  # long after the dead worker's lease
    drain(clocked, [workflow])

    done = settled(clocked, run.id)
    assert done.status == RunStatus.CANCELED
    assert done.compensation == ("succeeded" if compensable else None)
    statuses = [a.status for a in clocked.attempts(run.id) if a.step_name == "copy"]
    assert statuses and "running" not in statuses
