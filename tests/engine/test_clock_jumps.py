"""SQLite keeps the machine's clock: a jump of it (an hour back, a day forward) while two
workers execute and a run sleeps executes no step twice and loses no run.

The jump is made on a fake clock, which both workers read, while a step is executing: after a
jump forward every lease looks expired until its holder's heartbeat extends it on the new time,
and neither the holder (which never claims a run it executes) nor its sibling (which takes over
no lease for one lease after it saw the clock jump) may take the run meanwhile."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import (
    FAST,
    Effects,
    WorkerThread,
    stop_workers,
    wait_for_status,
    wait_until,
)
from umt.engine import Engine, FakeClock, RunStatus, StepContext, Workflow, WorkflowContext

pytestmark = pytest.mark.sqlite_only

NAP = timedelta(minutes=1)


class Jumpy:
    """A workflow whose first step waits (in the first run only) until the test has jumped."""

    def __init__(self, effects: Effects) -> None:
        self.effects = effects
        self.bodies: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()
        self.holding = threading.Event()
        self.release = threading.Event()
        self.workflow = Workflow("jumpy", "1", self._run)

    def _body(self, step: StepContext, hold: bool) -> str:
        with self.lock:
            self.bodies[(step.run_id, step.step_name)] += 1
        if hold:
            self.holding.set()
            while not self.release.wait(0.05):
                step.check()
        self.effects.record(step)
        return step.step_name

    def _run(self, ctx: WorkflowContext, spec: dict[str, Any]) -> list[str]:
        first = ctx.step("s1", lambda step: self._body(step, bool(spec.get("hold"))))
        ctx.sleep("nap", NAP)
        return [first, ctx.step("s2", lambda step: self._body(step, False))]


@pytest.mark.parametrize("jump", [timedelta(days=1), -timedelta(hours=1)],
                         ids=["forward-1-day", "back-1-hour"])
def test_a_jump_of_the_clock_runs_every_step_once_and_loses_no_run(
    clocked: Engine, clock: FakeClock, effects: Effects, jump: timedelta,
) -> None:
    jumpy = Jumpy(effects)
    workers = [WorkerThread(clocked.worker([jumpy.workflow], FAST)) for _ in range(2)]
    passes: list[Counter[str]] = [Counter() for _ in workers]
    for count, thread in zip(passes, workers, strict=True):
        claim = thread.worker._claim_free_slots

        def counted(claim: Any = claim, count: Counter[str] = count) -> int:
            count["passes"] += 1
            return claim()

        thread.worker._claim_free_slots = counted  # type: ignore[method-assign]
    for thread in workers:
        thread.start()
    try:
        sleeping = clocked.start(jumpy.workflow, {}).run.id
        wait_for_status(clocked, sleeping, RunStatus.SLEEPING)
        held = clocked.start(jumpy.workflow, {"hold": True}).run.id
        assert jumpy.holding.wait(20)

        clock.advance(jump)
        # both workers look for due runs several times, for longer than the heartbeat interval,
        # while the step still executes
        before = [count["passes"] for count in passes]
        wait_until(lambda: all(count["passes"] >= was + 10
                               for count, was in zip(passes, before, strict=True)),
                   message="claim passes after the jump")
        assert clocked.get(held).lease_epoch == 1, "the executing run was taken over"
        jumpy.release.set()

        wait_for_status(clocked, held, RunStatus.SLEEPING)
        clock.advance(NAP + max(-jump, timedelta(0)))  # an hour back: an hour more to sleep
        for run_id in (held, sleeping):
            wait_for_status(clocked, run_id, RunStatus.SUCCEEDED)
    finally:
        stop_workers(workers)

    for run_id in (held, sleeping):
        assert clocked.get(run_id).lease_epoch == 2  # claimed before and after its nap
        attempts = clocked.attempts(run_id)
        assert [(a.step_name, a.status, a.attempt) for a in attempts] == [
            ("s1", "succeeded", 1), ("s2", "succeeded", 1)]
        assert Counter(row["step"] for row in effects.rows(run_id)) == {"s1": 1, "s2": 1}
        assert jumpy.bodies[(run_id, "s1")] == jumpy.bodies[(run_id, "s2")] == 1
