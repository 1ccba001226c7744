"""Fencing: once another worker holds the run, nothing the old holder writes commits.

The multi-process version (SIGSTOP / SIGCONT) is in test_processes.py; here the old holder is
a worker whose heartbeat froze, in this process, and the store's fence is tested directly.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import FAST, Effects, WorkerThread, settled, wait_until
from umt.engine import (
    Engine,
    LeaseLost,
    RunStatus,
    StepContext,
    WorkerOptions,
    Workflow,
    WorkflowContext,
    open_database,
)
from umt.engine.store.values import BufferedStatement, LeaseState


def test_a_stale_fence_can_write_nothing(engine: Engine, effects: Effects) -> None:
    workflow = Workflow("fenced", "1", lambda ctx, _: ctx.step("copy", lambda step: 1))
    run = engine.start(workflow).run
    store = engine.store
    [old] = store.claim(str(uuid.uuid4()), [workflow.key], limit=1,
                        lease=timedelta(milliseconds=1))
    attempt_id, _ = store.begin_step(old.fence, 0, "copy")
    wait_until(lambda: store.claim(str(uuid.uuid4()), [workflow.key], limit=1,
                                   lease=timedelta(minutes=5)),
               message="a second claim after the first lease ran out")
    insert = effects.queries["insert_effect"]
    params = {"run_id": run.id, "step": "copy", "attempt": 1,
              "lease_epoch": old.fence.epoch, "note": "stale"}

    with pytest.raises(LeaseLost), store.fenced(old.fence) as session:
        session.execute(insert, params)
    with pytest.raises(LeaseLost):
        store.complete_step(old.fence, 0, attempt_id, "stale result",
                            [BufferedStatement(insert, params)])
    assert store.report_progress(old.fence, attempt_id, {"done": 1}) is False
    with pytest.raises(LeaseLost):
        store.complete_run(old.fence, "stale output")

    assert effects.rows() == []
    [step] = engine.steps(run.id)
    assert step.status == "pending" and step.result is None
    [attempt] = engine.attempts(run.id)
    assert attempt.status == "interrupted" and attempt.progress is None
    assert engine.get(run.id).status == RunStatus.RUNNING
    assert engine.get(run.id).lease_epoch == old.fence.epoch + 1


def test_a_frozen_worker_commits_nothing_after_a_takeover(
    engine: Engine, effects: Effects, db_url: str
) -> None:
    """The old holder believes it still holds the run (its heartbeat is frozen and it never
    looks), so only the database's fence stands between its writes and the business table.
    It writes while the new holder is inside the same step, before that step is done."""
    new_inside = threading.Event()
    old_done = threading.Event()
    inside_old = threading.Event()
    refused: list[str] = []
    old_engine = Engine(open_database(db_url))

    def copy(step: StepContext) -> str:
        if step.worker_id == old_worker.id:
            inside_old.set()
            new_inside.wait(30)
            try:
                step.progress(50, 100)
            except LeaseLost:
                refused.append("progress")
            try:
                effects.record_now(step, note="old, direct")
            except LeaseLost:
                refused.append("transaction")
            effects.record(step, note="old, with the result")
            return "old result"
        new_inside.set()
        old_done.wait(30)
        effects.record(step, note="new, with the result")
        return "new result"

    def run(ctx: WorkflowContext, _: Any) -> Any:
        return ctx.step("copy", copy)

    workflow = Workflow("frozen", "1", run)
    # One slot each, so that the frozen worker cannot claim the run again itself.
    short = WorkerOptions(concurrency=1, lease=timedelta(seconds=1),
                          poll_interval=FAST.poll_interval, grace_period=timedelta(seconds=5))
    old_worker = old_engine.worker([workflow], short)

    def still_mine(run_ids: Any) -> dict[str, LeaseState]:
        held = old_worker._held()
        return {run_id: LeaseState(RunStatus.RUNNING, old_worker.id, held[run_id].fence.epoch)
                for run_id in run_ids if run_id in held}

    # Frozen: its heartbeat does not reach the database, and what it reads says "yours".
    old_worker.store.extend_leases = lambda worker_id, held, lease: set(held)  # type: ignore[method-assign]
    old_worker.store.lease_states = still_mine  # type: ignore[method-assign]
    old = WorkerThread(old_worker).start()
    new: WorkerThread | None = None
    try:
        started = engine.start(workflow).run
        assert inside_old.wait(20)
        new = WorkerThread(engine.worker([workflow], short)).start()
        assert new_inside.wait(20)
        wait_until(lambda: old_worker.in_flight == 0, message="the old execution ended")
        # the old result was refused by the fence, not because the step was done already
        assert engine.steps(started.id)[0].status == "running"
        old_done.set()
        done = settled(engine, started.id)
    finally:
        new_inside.set()
        old_done.set()
        if new is not None:
            new.stop()
        old.stop()
        old_engine.close()

    assert done.status == RunStatus.SUCCEEDED and done.output == "new result"
    assert refused == ["progress", "transaction"]
    new_epoch = done.lease_epoch
    assert [(row["note"], row["lease_epoch"]) for row in effects.rows(started.id)] == [
        ("new, with the result", new_epoch)
    ]
    attempts = engine.attempts(started.id)
    assert [(a.worker_id == old_worker.id, a.status) for a in attempts] == [
        (True, "interrupted"), (False, "succeeded"),
    ]
    assert attempts[0].progress is None
    assert engine.steps(started.id)[0].result == "new result"
