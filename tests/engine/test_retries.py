"""Step retries: per-step policy, exponential backoff, history; only failures count."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import Effects, drain
from umt.engine import (
    DEFAULT_RETRY,
    Engine,
    FakeClock,
    PermanentError,
    RetryPolicy,
    RunStatus,
    StepContext,
    Workflow,
    WorkflowContext,
)


class Flaky:
    """A step that fails its first ``failures`` attempts; each attempt also buffers a business
    write, which must commit only with the attempt that succeeds."""

    def __init__(self, effects: Effects, failures: int, retry: RetryPolicy | None,
                 error: type[Exception] = RuntimeError) -> None:
        self.effects = effects
        self.failures = failures
        self.retry = retry
        self.error = error
        self.calls = 0
        self.workflow = Workflow("flaky", "1", self.run)

    def run(self, ctx: WorkflowContext, _: Any) -> Any:
        before = ctx.step("before", lambda step: "ok")
        value = ctx.step("flaky", self.body, retry=self.retry)
        return [before, value]

    def body(self, step: StepContext) -> str:
        self.calls += 1
        self.effects.record(step)
        if self.calls <= self.failures:
            raise self.error(f"boom {self.calls}")
        return f"ok after {self.calls}"


def test_backoff_grows_to_its_cap_and_the_step_fails_after_max_attempts(
    clocked: Engine, clock: FakeClock, effects: Effects
) -> None:
    policy = RetryPolicy(max_attempts=4, initial_interval=timedelta(seconds=10),
                         backoff_coefficient=3, max_interval=timedelta(seconds=60))
    flaky = Flaky(effects, failures=99, retry=policy)
    run = clocked.start(flaky.workflow).run

    for attempt, delay in [(1, 10), (2, 30), (3, 60)]:
        drain(clocked, [flaky.workflow])
        assert flaky.calls == attempt
        waiting = clocked.get(run.id)
        assert waiting.status == RunStatus.PENDING  # backing off is not running
        assert waiting.due_at == clock.now() + timedelta(seconds=delay)
        clock.advance(timedelta(seconds=delay - 1))
        assert drain(clocked, [flaky.workflow]).executed == 0
        clock.advance(timedelta(seconds=1))

    drain(clocked, [flaky.workflow])

    failed = clocked.get(run.id)
    assert flaky.calls == 4
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None
    assert failed.error["message"] == "step 'flaky' failed after 4 attempt(s): boom 4"
    attempts = [a for a in clocked.attempts(run.id) if a.step_name == "flaky"]
    assert [(a.attempt, a.status) for a in attempts] == [(n, "failed") for n in (1, 2, 3, 4)]
    assert [a.error["message"] for a in attempts if a.error] == [f"boom {n}" for n in (1, 2, 3, 4)]
    assert all(a.error and a.error["type"] == "RuntimeError" for a in attempts)
    [step] = [s for s in clocked.steps(run.id) if s.name == "flaky"]
    assert (step.status, step.failures, step.attempts) == ("failed", 4, 4)
    assert step.error is not None and step.error["message"] == "boom 4"
    # the failed attempts' buffered writes were never committed
    assert effects.count(run.id) == 0
    assert drain(clocked, [flaky.workflow]).executed == 0


def test_a_step_that_recovers_succeeds_and_keeps_its_history(
    clocked: Engine, clock: FakeClock, effects: Effects
) -> None:
    policy = RetryPolicy(max_attempts=3, initial_interval=timedelta(seconds=1))
    flaky = Flaky(effects, failures=2, retry=policy)
    run = clocked.start(flaky.workflow).run
    for _ in range(3):
        drain(clocked, [flaky.workflow])
        clock.advance(timedelta(minutes=1))

    done = clocked.get(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == ["ok", "ok after 3"]
    attempts = [a for a in clocked.attempts(run.id) if a.step_name == "flaky"]
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, "failed"), (2, "failed"), (3, "succeeded"),
    ]
    # only the successful attempt's write committed; the step before ran once
    assert [(row["step"], row["attempt"]) for row in effects.rows(run.id)] == [("flaky", 3)]
    [before] = [a for a in clocked.attempts(run.id) if a.step_name == "before"]
    assert before.attempt == 1


@pytest.mark.parametrize("error", [PermanentError, type("Fatal", (PermanentError,), {})])
def test_a_permanent_error_fails_the_step_at_once(
    engine: Engine, effects: Effects, error: type[Exception]
) -> None:
    flaky = Flaky(effects, failures=99, retry=RetryPolicy(max_attempts=10), error=error)
    run = engine.start(flaky.workflow).run
    drain(engine, [flaky.workflow])

    failed = engine.get(run.id)
    assert failed.status == RunStatus.FAILED
    assert flaky.calls == 1
    assert failed.error is not None and "boom 1" in failed.error["message"]
    assert [a.status for a in engine.attempts(run.id) if a.step_name == "flaky"] == ["failed"]


def test_the_default_policy_allows_five_attempts(
    clocked: Engine, clock: FakeClock, effects: Effects
) -> None:
    assert DEFAULT_RETRY.max_attempts == 5
    flaky = Flaky(effects, failures=99, retry=None)
    run = clocked.start(flaky.workflow).run
    for _ in range(10):
        drain(clocked, [flaky.workflow])
        clock.advance(DEFAULT_RETRY.max_interval)
    assert clocked.get(run.id).status == RunStatus.FAILED
    assert flaky.calls == 5


def test_reclaims_after_a_worker_died_use_up_no_attempts(
    clocked: Engine, clock: FakeClock, effects: Effects
) -> None:
    """Two workers die inside the step (they claimed, began the attempt, and vanished); with
    two allowed attempts, one real failure still leaves room for a success."""
    flaky = Flaky(effects, failures=1, retry=RetryPolicy(max_attempts=2,
                                                         initial_interval=timedelta(0)))
    run = clocked.start(flaky.workflow).run
    lease = timedelta(seconds=30)
    store = clocked.store
    for _ in range(2):
        [claim] = store.claim(str(uuid.uuid4()), [flaky.workflow.key], limit=1, lease=lease)
        if 0 not in claim.steps:
            attempt_id, _number = store.begin_step(claim.fence, 0, "before")
            store.complete_step(claim.fence, 0, attempt_id, "ok")
        store.begin_step(claim.fence, 1, "flaky")
        clock.advance(lease + timedelta(seconds=1))  # the lease runs out: dead for sure

    drain(clocked, [flaky.workflow])  # attempt 1 fails (no backoff) ...
    drain(clocked, [flaky.workflow])  # ... attempt 2 succeeds

    done = clocked.get(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    attempts = [a for a in clocked.attempts(run.id) if a.step_name == "flaky"]
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, "interrupted"), (1, "interrupted"), (1, "failed"), (2, "succeeded"),
    ]
    assert [s.failures for s in clocked.steps(run.id) if s.name == "flaky"] == [1]


def test_sleeping_and_waiting_use_up_no_attempts(clocked: Engine, clock: FakeClock) -> None:
    def run(ctx: WorkflowContext, _: Any) -> Any:
        ctx.step("first", lambda step: step.attempt)
        ctx.sleep("nap", "1m")
        ctx.wait_for_signal("wait", "go")
        return ctx.step("last", lambda step: step.attempt)

    workflow = Workflow("parks", "1", run)
    started = clocked.start(workflow).run
    drain(clocked, [workflow])
    clock.advance(timedelta(minutes=1))
    drain(clocked, [workflow])
    clocked.signal("go")
    drain(clocked, [workflow])

    done = clocked.get(started.id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == 1
    assert done.lease_epoch == 3  # three claims ...
    assert {a.attempt for a in clocked.attempts(started.id)} == {1}  # ... first attempts only


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"backoff_coefficient": 0.5},
     {"initial_interval": timedelta(seconds=-1)}],
)
def test_invalid_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


def test_a_step_whose_own_transaction_fails_is_a_failed_attempt(
    clocked: Engine, clock: FakeClock, effects: Effects
) -> None:
    """The step's business write violates a constraint when it commits with the result: that
    attempt failed (and is retried), it is not left running."""
    queries = effects.queries
    with clocked.database.transaction() as session:
        session.execute(queries["create_catalog"])
        session.execute(queries["insert_catalog"], {"title": "taken", "run_id": "someone"})
    titles = ["taken", "free"]

    def register(step: StepContext) -> str:
        title = titles[min(step.attempt - 1, 1)]
        step.step_transaction.execute(queries["insert_catalog"],
                                      {"title": title, "run_id": step.run_id})
        return title

    workflow = Workflow("catalog", "1", lambda ctx, _: ctx.step(
        "register", register, retry=RetryPolicy(max_attempts=2, initial_interval=timedelta(0))))
    run = clocked.start(workflow).run
    drain(clocked, [workflow])
    drain(clocked, [workflow])

    done = clocked.get(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "free"
    attempts = clocked.attempts(run.id)
    assert [(a.attempt, a.status) for a in attempts] == [(1, "failed"), (2, "succeeded")]
    assert attempts[0].error is not None
    with clocked.database.autocommit() as session:
        rows = session.execute(queries["catalog"])
    assert [(row["title"], row["run_id"]) for row in rows] == [
        ("free", run.id), ("taken", "someone"),
    ]
