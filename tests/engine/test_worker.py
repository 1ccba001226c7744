"""A worker's life in one process: draining, stopping, handing back, registered versions."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import FAST, Effects, WorkerThread, drain, wait_for_status
from umt.engine import NO_RETRY, Engine, PermanentError, RunStatus, WorkerOptions, Workflow


def _one_step(ctx: Any, value: Any) -> Any:
    return ctx.step("only", lambda step: value)


ONE_STEP = Workflow("one-step", "1", _one_step)


def _threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.is_alive()}


def _assert_no_thread_left(before: set[threading.Thread]) -> None:
    """Threads the worker started are gone after a short while."""

    def leftovers() -> set[str]:
        return {t.name for t in _threads() - before}

    deadline = time.monotonic() + 3
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers() == set()


def test_a_drained_worker_leaves_no_thread_behind(engine: Engine) -> None:
    # Default options: a 30 s lease, so a heartbeat that only notices the stop at its next
    # beat (every 10 s) would outlive the worker.
    engine.start(ONE_STEP, 1)  # also opens the connection pool, whose threads stay
    before = _threads()
    report = engine.worker([ONE_STEP], WorkerOptions()).drain()
    assert report.executed == 1
    _assert_no_thread_left(before)


def test_a_stopped_worker_leaves_no_thread_behind(engine: Engine) -> None:
    run = engine.start(ONE_STEP, 1).run
    before = _threads()
    worker = WorkerThread(engine.worker([ONE_STEP], WorkerOptions())).start()
    wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
    worker.stop()
    _assert_no_thread_left(before)


def test_stop_lets_a_step_finish_within_the_grace_period(
    engine: Engine, effects: Effects
) -> None:
    started = threading.Event()

    def body(step: Any) -> str:
        started.set()
        time.sleep(0.3)  # shorter than the grace period, and never calls check()
        effects.record(step)
        return "done"

    workflow = Workflow("graceful", "1", lambda ctx, _: ctx.step("slow", body))
    run = engine.start(workflow).run
    worker = WorkerThread(engine.worker([workflow], FAST)).start()
    assert started.wait(20)
    worker.stop()

    finished = engine.get(run.id)
    assert finished.status == RunStatus.SUCCEEDED
    assert effects.count(run.id) == 1


def test_stop_hands_back_a_step_that_outlasts_the_grace_period(
    engine: Engine, effects: Effects
) -> None:
    started = threading.Event()
    interrupted: list[BaseException] = []

    def body(step: Any) -> str:
        if step.attempt == 1 and not started.is_set():
            started.set()
            try:
                while True:
                    step.sleep(0.05)  # checks; raises WorkerStopping once asked to hand back
            except BaseException as exc:
                interrupted.append(exc)
                raise
        effects.record(step)
        return "finished elsewhere"

    workflow = Workflow("handed-back", "1", lambda ctx, _: ctx.step("long", body))
    run = engine.start(workflow).run
    first = WorkerThread(engine.worker([workflow], FAST)).start()
    assert started.wait(20)
    first.stop()

    assert [type(exc).__name__ for exc in interrupted] == ["WorkerStopping"]
    handed = engine.get(run.id)
    assert handed.status == RunStatus.PENDING
    assert handed.lease_owner is None
    assert handed.due_at is not None
    attempts = engine.attempts(run.id)
    assert [a.status for a in attempts] == ["handed_back"]

    # due at once: the next worker does not wait for a lease to expire
    assert drain(engine, [workflow], WorkerOptions(lease=timedelta(minutes=10))).executed == 1
    assert engine.get(run.id).status == RunStatus.SUCCEEDED
    assert [a.status for a in engine.attempts(run.id)] == ["handed_back", "succeeded"]
    # a hand-back is not a failure: the retry attempt number does not move
    assert [a.attempt for a in engine.attempts(run.id)] == [1, 1]
    assert effects.count(run.id) == 1


def test_a_worker_claims_only_the_versions_it_registers(engine: Engine) -> None:
    v1 = Workflow("versioned", "1", _one_step)
    v2 = Workflow("versioned", "2", _one_step)
    old = engine.start(v1, "old").run
    new = engine.start(v2, "new").run

    report = drain(engine, [v2])

    assert report.executed == 1
    assert engine.get(new.id).status == RunStatus.SUCCEEDED
    untouched = engine.get(old.id)
    assert untouched.status == RunStatus.PENDING
    assert untouched.lease_epoch == 0 and untouched.error is None
    assert engine.attempts(old.id) == []

    assert drain(engine, [v1]).executed == 1
    assert engine.get(old.id).status == RunStatus.SUCCEEDED


def test_drain_also_executes_what_its_own_executions_made_due(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that fails makes its compensation due at once; the pass must not end before it,
    even when the execution finishes while the pass is asking the database for more work."""

    def run(ctx: Any, _: Any) -> None:
        ctx.step("fail", _fail_now, retry=NO_RETRY)

    def compensate(ctx: Any, _: Any) -> None:
        ctx.step("undo", lambda step: "undone")

    claim = engine.store.claim

    def slow_claim(*args: Any, **kwargs: Any) -> Any:
        claims = claim(*args, **kwargs)
        if not claims:
            time.sleep(0.3)  # a slow answer: the execution in flight finishes meanwhile
        return claims

    monkeypatch.setattr(engine.store, "claim", slow_claim)
    workflow = Workflow("fails-then-undoes", "1", run, compensate=compensate)
    started = engine.start(workflow).run

    drain(engine, [workflow])

    done = engine.get(started.id)
    assert (done.status, done.compensation) == (RunStatus.FAILED, "succeeded")


def _fail_now(step: Any) -> None:
    raise PermanentError("fails at once")
