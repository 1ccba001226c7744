"""Signals: a durable mailbox with delivery reports, targets, idempotency keys and expiry."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from tests.engine.conftest import FAST, IdleWaits, WorkerThread, drain, wait_for_status
from umt.engine import (
    Engine,
    FakeClock,
    InvalidSignalName,
    RunFinished,
    RunStatus,
    SignalKeyConflict,
    WorkerOptions,
    Workflow,
)


def _receive(ctx: Any, value: Any) -> Any:
    timeout = value.get("timeout") if isinstance(value, dict) else None
    signal_name = value["signal"] if isinstance(value, dict) else value
    received = ctx.wait_for_signal("wait", signal_name, timeout=timeout)
    return None if received is None else {"id": received.id, "data": received.data}


RECEIVER = Workflow("receiver", "1", _receive)


def _waiting(engine: Engine, value: Any = "ping") -> str:
    run = engine.start(RECEIVER, value).run
    drain(engine, [RECEIVER])
    assert engine.get(run.id).status == RunStatus.WAITING
    return run.id


def test_the_step_before_a_wait_is_recorded_when_the_run_parks(engine: Engine) -> None:
    """The step's result commits with the wait that parks the run, and counts on replay."""
    bodies: list[str] = []

    def run(ctx: Any, _: Any) -> Any:
        before = ctx.step("before", lambda step: bodies.append("before") or "kept")
        received = ctx.wait_for_signal("wait", "after-a-step")
        return [before, None if received is None else received.data]

    workflow = Workflow("step-then-wait", "1", run)
    run_id = engine.start(workflow).run.id
    drain(engine, [workflow])
    assert engine.get(run_id).status == RunStatus.WAITING
    [step, wait] = engine.steps(run_id)
    assert (step.name, step.status, step.result) == ("before", "succeeded", "kept")
    assert [(a.step_name, a.status) for a in engine.attempts(run_id)] == [
        ("before", "succeeded")]
    assert (wait.name, wait.status) == ("wait", "waiting")

    engine.signal("after-a-step", 1)
    drain(engine, [workflow])
    assert engine.get(run_id).output == ["kept", 1]
    assert bodies == ["before"]


def test_a_signal_to_a_waiting_run_is_delivered(engine: Engine) -> None:
    run_id = _waiting(engine)
    [waiting] = engine.runs_waiting_on("pi")
    assert (waiting.run_id, waiting.signal_name) == (run_id, "ping")

    result = engine.signal("ping", {"n": 1})

    assert result.delivered_to == (run_id,)
    assert not result.kept and not result.duplicate
    assert engine.get(run_id).status == RunStatus.PENDING  # due at once
    assert engine.runs_waiting_on("pi") == []
    drain(engine, [RECEIVER])
    done = engine.get(run_id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == {"id": result.signal_id, "data": {"n": 1}}


def test_a_signal_reaches_every_run_waiting_on_its_name(engine: Engine) -> None:
    first, second = _waiting(engine), _waiting(engine)
    other = _waiting(engine, "pong")

    result = engine.signal("ping", "all")

    assert set(result.delivered_to) == {first, second}
    drain(engine, [RECEIVER])
    assert engine.get(first).output["data"] == "all"
    assert engine.get(second).output["data"] == "all"
    assert engine.get(other).status == RunStatus.WAITING


def test_an_early_signal_is_kept_then_received(engine: Engine) -> None:
    result = engine.signal("ping", "early")
    assert result.kept and result.delivered_to == ()

    run = engine.start(RECEIVER, "ping").run
    drain(engine, [RECEIVER])

    done = engine.get(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == {"id": result.signal_id, "data": "early"}
    # the first waiter consumed it: a second one waits
    later = _waiting(engine)
    assert engine.get(later).status == RunStatus.WAITING


def test_kept_signals_are_received_in_the_order_they_were_sent(engine: Engine) -> None:
    engine.signal("ping", 1)
    engine.signal("ping", 2)
    first = engine.start(RECEIVER, "ping").run
    drain(engine, [RECEIVER])
    second = engine.start(RECEIVER, "ping").run
    drain(engine, [RECEIVER])
    assert engine.get(first.id).output["data"] == 1
    assert engine.get(second.id).output["data"] == 2


def test_a_signal_sent_twice_with_one_key_is_delivered_once(engine: Engine) -> None:
    early = engine.signal("ping", "once", idempotency_key="hook-1")
    again = engine.signal("ping", "once", idempotency_key="hook-1")
    assert early.kept and again.kept
    assert again.duplicate and again.signal_id == early.signal_id

    first = engine.start(RECEIVER, "ping").run
    second = engine.start(RECEIVER, "ping").run
    drain(engine, [RECEIVER])

    outcomes = {engine.get(first.id).status, engine.get(second.id).status}
    assert outcomes == {RunStatus.SUCCEEDED, RunStatus.WAITING}
    receiver = first.id if engine.get(first.id).status == RunStatus.SUCCEEDED else second.id
    # sent a third time once consumed: still the first send's outcome, nothing new
    third = engine.signal("ping", "once", idempotency_key="hook-1")
    assert third.duplicate and third.signal_id == early.signal_id
    assert third.delivered_to == (receiver,) and not third.kept
    drain(engine, [RECEIVER])
    assert sorted(r.status for r in engine.list_runs()) == ["succeeded", "waiting"]


def test_a_duplicate_of_a_delivered_signal_reports_the_first_delivery(engine: Engine) -> None:
    first_run = _waiting(engine)
    first = engine.signal("ping", "x", idempotency_key="k")
    second_run = _waiting(engine)
    again = engine.signal("ping", "x", idempotency_key="k")

    assert again.duplicate
    assert again.delivered_to == first.delivered_to == (first_run,)
    assert engine.get(second_run).status == RunStatus.WAITING


@pytest.mark.parametrize(
    "change", [{"name": "pong"}, {"data": "other"}, {"target": True}]
)
def test_one_key_for_a_different_signal_is_a_conflict(
    engine: Engine, change: dict[str, Any]
) -> None:
    run_id = _waiting(engine, "pong")
    engine.signal("ping", "x", idempotency_key="k")
    with pytest.raises(SignalKeyConflict):
        engine.signal(
            change.get("name", "ping"), change.get("data", "x"), idempotency_key="k",
            run_id=run_id if change.get("target") else None,
        )
    assert engine.get(run_id).status == RunStatus.WAITING


def test_a_targeted_signal_reaches_only_its_run(engine: Engine) -> None:
    target, bystander = _waiting(engine), _waiting(engine)

    result = engine.signal("ping", "for you", run_id=target)

    assert result.delivered_to == (target,)
    drain(engine, [RECEIVER])
    assert engine.get(target).output["data"] == "for you"
    assert engine.get(bystander).status == RunStatus.WAITING


def test_an_early_targeted_signal_is_kept_for_its_run_only(engine: Engine) -> None:
    target = engine.start(RECEIVER, "ping").run  # pending: not waiting yet
    result = engine.signal("ping", "for you", run_id=target.id)
    assert result.kept

    bystander = engine.start(RECEIVER, "ping").run
    drain(engine, [RECEIVER])

    assert engine.get(target.id).output == {"id": result.signal_id, "data": "for you"}
    assert engine.get(bystander.id).status == RunStatus.WAITING


def test_signals_to_finished_runs_are_refused(engine: Engine) -> None:
    done = engine.start(RECEIVER, "ping").run
    engine.signal("ping", "x")
    drain(engine, [RECEIVER])
    assert engine.get(done.id).status == RunStatus.SUCCEEDED
    canceled = _waiting(engine)
    engine.cancel(canceled)

    with pytest.raises(RunFinished, match="succeeded"):
        engine.signal("ping", "late", run_id=done.id)
    with pytest.raises(RunFinished, match="canceled") as refused:
        engine.signal("ping", "late", run_id=canceled)
    assert canceled in str(refused.value)

    # nothing was kept: a new waiter does not receive the refused signals
    fresh = _waiting(engine)
    assert engine.get(fresh).status == RunStatus.WAITING
    # an untargeted signal is not aimed at the canceled run and is not delivered to it
    result = engine.signal("ping", "broadcast")
    assert result.delivered_to == (fresh,)


def test_a_wait_that_times_out_returns_none(clocked: Engine, clock: FakeClock) -> None:
    run = clocked.start(RECEIVER, {"signal": "ping", "timeout": "10m"}).run
    drain(clocked, [RECEIVER])
    waiting = clocked.get(run.id)
    assert waiting.status == RunStatus.WAITING
    assert waiting.due_at == clock.now() + timedelta(minutes=10)

    clock.advance(timedelta(minutes=9))
    assert drain(clocked, [RECEIVER]).executed == 0
    clock.advance(timedelta(minutes=1))
    drain(clocked, [RECEIVER])

    done = clocked.get(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output is None
    assert clocked.steps(run.id)[0].status == "timed_out"
    # a signal after the timeout is kept for someone else
    assert clocked.signal("ping", "late").kept


def test_a_signal_before_the_timeout_wins(clocked: Engine, clock: FakeClock) -> None:
    run = clocked.start(RECEIVER, {"signal": "ping", "timeout": "10m"}).run
    drain(clocked, [RECEIVER])
    clock.advance(timedelta(minutes=5))
    assert clocked.signal("ping", "in time").delivered_to == (run.id,)
    clock.advance(timedelta(minutes=10))
    drain(clocked, [RECEIVER])
    assert clocked.get(run.id).output["data"] == "in time"


def test_a_signal_after_the_deadline_but_before_the_timeout_is_recorded_wins(
    clocked: Engine, clock: FakeClock
) -> None:
    # The deadline makes the run due; the wait stays open until a worker records the timeout,
    # so a sender is never told "delivered" for a signal the run then ignores.
    run = clocked.start(RECEIVER, {"signal": "ping", "timeout": "10m"}).run
    drain(clocked, [RECEIVER])
    clock.advance(timedelta(minutes=11))
    assert clocked.signal("ping", "just late").delivered_to == (run.id,)
    drain(clocked, [RECEIVER])
    assert clocked.get(run.id).output["data"] == "just late"
    assert clocked.steps(run.id)[0].status != "timed_out"


def test_kept_signals_expire(clocked: Engine, clock: FakeClock) -> None:
    short = clocked.signal("ping", "short", ttl=timedelta(minutes=5))
    default = clocked.signal("pong", "default ttl")
    assert short.kept and default.kept

    clock.advance(timedelta(minutes=6))
    late = clocked.start(RECEIVER, "ping").run
    drain(clocked, [RECEIVER])
    assert clocked.get(late.id).status == RunStatus.WAITING

    on_time = clocked.start(RECEIVER, "pong").run
    drain(clocked, [RECEIVER])
    assert clocked.get(on_time.id).output["data"] == "default ttl"


def test_the_engine_wide_signal_ttl_applies(engine: Engine, clock: FakeClock) -> None:
    short_lived = Engine(engine.database, clock=clock, signal_ttl=timedelta(seconds=30))
    short_lived.signal("ping", "x")
    clock.advance(timedelta(seconds=31))
    run = short_lived.start(RECEIVER, "ping").run
    drain(short_lived, [RECEIVER])
    assert short_lived.get(run.id).status == RunStatus.WAITING


@pytest.mark.parametrize("name", ["", "has space", "tab\there", "x" * 301])
def test_invalid_signal_names_are_refused(engine: Engine, name: str) -> None:
    with pytest.raises(InvalidSignalName):
        engine.signal(name)
    assert not engine.list_runs()


def test_an_idle_worker_is_woken_by_a_signal_not_by_its_poll(engine: Engine) -> None:
    """PostgreSQL wakes it with NOTIFY, SQLite with its cheap data_version poll; either way
    not the worker's fallback poll, which is set to a minute here."""
    slow_poll = WorkerOptions(
        lease=FAST.lease, poll_interval=timedelta(minutes=1), grace_period=FAST.grace_period
    )
    serving = engine.worker([RECEIVER], slow_poll)
    waits = IdleWaits.watch(serving)
    worker = WorkerThread(serving).start()
    try:
        run = engine.start(RECEIVER, "ping").run
        wait_for_status(engine, run.id, RunStatus.WAITING)
        assert waits.idle.wait(30), "the worker never went idle"
        engine.signal("ping", "wake up")
        done = wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
        assert done.output["data"] == "wake up"
    finally:
        worker.stop()
    assert waits.ended and all(waits.ended), "a poll timeout, not the signal, woke the worker"


def test_signals_racing_with_running_workers_are_never_lost(
    engine: Engine, run_worker: Any
) -> None:
    """Each run does a step, then waits for its own signal; the signals are sent while the
    runs are being executed, so some arrive before the wait, some during, some after."""
    def run(ctx: Any, n: int) -> Any:
        ctx.step("work", lambda step: n)
        received = ctx.wait_for_signal("wait", f"race-{n}")
        return None if received is None else received.data

    workflow = Workflow("racer", "1", run)
    run_worker([workflow])
    run_worker([workflow])
    runs = [engine.start(workflow, n).run for n in range(30)]
    outcomes = [engine.signal(f"race-{n}", n * 10) for n in range(30)]

    for n, started in enumerate(runs):
        done = wait_for_status(engine, started.id, RunStatus.SUCCEEDED, timeout=30)
        assert done.output == n * 10
    # each signal was either delivered to its run or kept and consumed by it
    for n, outcome in enumerate(outcomes):
        assert outcome.kept or outcome.delivered_to == (runs[n].id,)


def test_concurrent_sends_with_one_key_deliver_once(engine: Engine) -> None:
    waiting = [_waiting(engine) for _ in range(2)]
    barrier = threading.Barrier(6)
    results: list[Any] = []

    def send() -> None:
        barrier.wait()
        try:
            results.append(engine.signal("ping", "hook", idempotency_key="done:abc"))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sum(not r.duplicate for r in results) == 1
    assert len({r.signal_id for r in results}) == 1
    assert {tuple(sorted(r.delivered_to)) for r in results} == {tuple(sorted(waiting))}


def test_concurrent_sends_of_different_signals_with_one_key_conflict(engine: Engine) -> None:
    """Senders of different names do not wait for each other; the key still decides."""
    results: list[Any] = []

    def send(barrier: threading.Barrier, name: str, key: str) -> None:
        barrier.wait()
        try:
            results.append(engine.signal(name, "x", idempotency_key=key))
        except BaseException as exc:
            results.append(exc)

    for round_number in range(5):
        results.clear()
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=send, args=(barrier, name, f"key-{round_number}"))
                   for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        errors = [type(r).__name__ for r in results if isinstance(r, BaseException)]
        assert errors == ["SignalKeyConflict"], results
