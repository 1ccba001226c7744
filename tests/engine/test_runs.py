"""Starting runs, idempotency keys, start times, and reading runs back."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.engine.conftest import drain, settled
from umt.engine import (
    NO_RETRY,
    Engine,
    FakeClock,
    IdempotencyConflict,
    PermanentError,
    RunFinished,
    RunStatus,
    UnknownRun,
    Workflow,
)


def _echo(ctx: Any, value: Any) -> Any:
    first = ctx.step("first", lambda step: {"got": value})
    second = ctx.step("second", lambda step: first["got"])
    return {"echo": second}


ECHO = Workflow("echo", "1", _echo)
OTHER = Workflow("other", "1", _echo)


def _fails(ctx: Any, value: Any) -> None:
    def boom(step: Any) -> None:
        raise PermanentError("no")

    ctx.step("boom", boom, retry=NO_RETRY)


FAILS = Workflow("keyed", "1", _fails)


def _waits(ctx: Any, value: Any) -> Any:
    return ctx.wait_for_signal("wait", "never-sent")


WAITS = Workflow("keyed", "1", _waits)


def _compensated_waiter(ctx: Any, value: Any) -> Any:
    return ctx.wait_for_signal("wait", "never-sent")


def _undo(ctx: Any, value: Any) -> None:
    ctx.step("undo", lambda step: "undone")


COMPENSATED = Workflow("keyed", "1", _compensated_waiter, compensate=_undo)


# ---------------------------------------------------------------------------- start and read


def test_start_creates_a_pending_run_that_a_worker_completes(engine: Engine) -> None:
    started = engine.start(ECHO, {"n": 1})
    assert started.created
    run = started.run
    assert run.status == RunStatus.PENDING
    assert (run.workflow, run.version, run.input) == ("echo", "1", {"n": 1})
    assert run.output is None and run.finished_at is None

    report = drain(engine, [ECHO])

    assert report.executed == 1
    done = engine.get(run.id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == {"echo": {"n": 1}}
    assert done.finished_at is not None and done.lease_owner is None


@pytest.mark.parametrize("key", [None, "k-1"])
def test_start_returns_the_run_as_stored(engine: Engine, key: str | None) -> None:
    value = {"title": "Wall·E", "sizes": [1, 2.5, None], "nested": {"b": True, "a": "x"}}
    later = engine.clock.now() + timedelta(hours=1)
    for start_at in (None, later):
        started = engine.start(ECHO, value, idempotency_key=key and f"{key}-{start_at}",
                               start_at=start_at)
        assert started.created
        assert started.run == engine.get(started.run.id)
        assert started.run.due_at == (start_at or started.run.created_at)
    again = engine.start(ECHO, value, idempotency_key="k-2")
    assert engine.start(ECHO, value, idempotency_key="k-2").run == again.run


def test_steps_and_attempts_are_listed_in_order(engine: Engine) -> None:
    run = engine.start(ECHO, 7).run
    drain(engine, [ECHO])

    steps = engine.steps(run.id)
    assert [(s.position, s.name, s.kind, s.status) for s in steps] == [
        (0, "first", "step", "succeeded"),
        (1, "second", "step", "succeeded"),
    ]
    assert steps[0].result == {"got": 7}
    assert steps[1].result == 7
    assert [s.attempts for s in steps] == [1, 1]
    attempts = engine.attempts(run.id)
    assert [(a.step_name, a.attempt, a.status) for a in attempts] == [
        ("first", 1, "succeeded"),
        ("second", 1, "succeeded"),
    ]
    assert all(a.finished_at is not None for a in attempts)
    assert {a.lease_epoch for a in attempts} == {engine.get(run.id).lease_epoch}


def test_list_runs_filters_by_status_and_workflow(engine: Engine) -> None:
    done = engine.start(ECHO, 1).run
    drain(engine, [ECHO])
    pending = engine.start(ECHO, 2).run
    other = engine.start(OTHER, 3).run

    assert {r.id for r in engine.list_runs()} == {done.id, pending.id, other.id}
    assert [r.id for r in engine.list_runs(status="succeeded")] == [done.id]
    assert {r.id for r in engine.list_runs(status="pending")} == {pending.id, other.id}
    assert {r.id for r in engine.list_runs(workflow="echo")} == {done.id, pending.id}
    assert [r.id for r in engine.list_runs(workflow="other", status="pending")] == [other.id]
    assert len(engine.list_runs(limit=2)) == 2
    # newest first
    assert engine.list_runs()[0].id == other.id


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "", "9dd83537-52d7-4c16-9c4b-279cc199327e"])
def test_unknown_run_ids_are_reported(engine: Engine, bad_id: str) -> None:
    with pytest.raises(UnknownRun):
        engine.get(bad_id)
    with pytest.raises(UnknownRun):
        engine.steps(bad_id)
    with pytest.raises(UnknownRun):
        engine.attempts(bad_id)
    with pytest.raises(UnknownRun):
        engine.cancel(bad_id)
    with pytest.raises(UnknownRun):
        engine.signal("some-signal", run_id=bad_id)
    with pytest.raises(UnknownRun):
        engine.annotate(bad_id, "x")


def test_a_finished_run_cannot_be_canceled(engine: Engine) -> None:
    run = engine.start(ECHO, 1).run
    drain(engine, [ECHO])
    with pytest.raises(RunFinished, match="succeeded"):
        engine.cancel(run.id)
    assert engine.get(run.id).status == RunStatus.SUCCEEDED


def test_input_must_be_json(engine: Engine) -> None:
    with pytest.raises((TypeError, ValueError)):
        engine.start(ECHO, {"when": object()})
    assert engine.list_runs() == []


# ---------------------------------------------------------------------------- start_at


def test_start_at_defers_the_run(clocked: Engine, clock: FakeClock) -> None:
    later = clock.now() + timedelta(hours=1)
    run = clocked.start(ECHO, 1, start_at=later).run
    assert run.due_at == later

    assert drain(clocked, [ECHO]).executed == 0
    assert clocked.get(run.id).status == RunStatus.PENDING

    clock.advance(timedelta(minutes=59))
    assert drain(clocked, [ECHO]).executed == 0

    clock.advance(timedelta(minutes=1))
    assert drain(clocked, [ECHO]).executed == 1
    assert clocked.get(run.id).status == RunStatus.SUCCEEDED


def test_start_at_in_the_past_runs_at_once(clocked: Engine, clock: FakeClock) -> None:
    run = clocked.start(ECHO, 1, start_at=clock.now() - timedelta(days=1)).run
    assert drain(clocked, [ECHO]).executed == 1
    assert clocked.get(run.id).status == RunStatus.SUCCEEDED


# ---------------------------------------------------------------------------- idempotency


def test_same_key_and_input_returns_the_existing_run(engine: Engine) -> None:
    first = engine.start(ECHO, {"a": 1, "b": [1, 2]}, idempotency_key="k1")
    # key order of the input does not matter: equal JSON is equal input
    again = engine.start(ECHO, {"b": [1, 2], "a": 1}, idempotency_key="k1")
    assert first.created and not again.created
    assert again.run.id == first.run.id
    assert len(engine.list_runs()) == 1

    drain(engine, [ECHO])
    after = engine.start(ECHO, {"a": 1, "b": [1, 2]}, idempotency_key="k1")
    assert not after.created
    assert after.run.id == first.run.id and after.run.status == RunStatus.SUCCEEDED
    assert len(engine.list_runs()) == 1


def test_same_key_with_different_input_is_a_conflict(engine: Engine) -> None:
    first = engine.start(ECHO, {"a": 1}, idempotency_key="k1").run
    with pytest.raises(IdempotencyConflict) as raised:
        engine.start(ECHO, {"a": 2}, idempotency_key="k1")
    assert raised.value.run_id == first.id
    assert first.id in str(raised.value)
    assert len(engine.list_runs()) == 1
    # also once the run has finished: the key lives as long as the run
    drain(engine, [ECHO])
    with pytest.raises(IdempotencyConflict):
        engine.start(ECHO, {"a": 2}, idempotency_key="k1")


def test_keys_are_per_workflow(engine: Engine) -> None:
    mine = engine.start(ECHO, 1, idempotency_key="shared").run
    theirs = engine.start(OTHER, 2, idempotency_key="shared")
    assert theirs.created and theirs.run.id != mine.id
    plain_one = engine.start(ECHO, 1).run
    plain_two = engine.start(ECHO, 1).run
    assert plain_one.id != plain_two.id  # no key: no deduplication


def test_a_failed_run_releases_its_key(engine: Engine) -> None:
    failed = engine.start(FAILS, {"x": 1}, idempotency_key="k").run
    drain(engine, [FAILS])
    assert engine.get(failed.id).status == RunStatus.FAILED

    again = engine.start(FAILS, {"x": 1}, idempotency_key="k")
    assert again.created and again.run.id != failed.id
    # the new holder decides: different input now conflicts with it
    with pytest.raises(IdempotencyConflict) as raised:
        engine.start(FAILS, {"x": 2}, idempotency_key="k")
    assert raised.value.run_id == again.run.id


def test_a_canceled_run_releases_its_key(engine: Engine) -> None:
    canceled = engine.start(WAITS, 1, idempotency_key="k").run
    drain(engine, [WAITS])
    engine.cancel(canceled.id)

    again = engine.start(WAITS, 1, idempotency_key="k")
    assert again.created and again.run.id != canceled.id
    assert engine.get(canceled.id).status == RunStatus.CANCELED


def test_a_compensating_run_keeps_its_key_until_compensation_finished(engine: Engine) -> None:
    canceled = engine.start(COMPENSATED, 1, idempotency_key="k").run
    drain(engine, [COMPENSATED])
    engine.cancel(canceled.id)
    assert engine.get(canceled.id).compensation == "pending"

    during = engine.start(COMPENSATED, 1, idempotency_key="k")
    assert not during.created and during.run.id == canceled.id

    drain(engine, [COMPENSATED])
    assert settled(engine, canceled.id).compensation == "succeeded"
    after = engine.start(COMPENSATED, 1, idempotency_key="k")
    assert after.created and after.run.id != canceled.id


# ---------------------------------------------------------------------------- joined transactions


@pytest.mark.postgres_only
def test_start_joins_the_callers_transaction(engine: Engine, db_url: str) -> None:
    with psycopg.connect(db_url) as connection:
        before = connection.execute("SHOW search_path").fetchone()
        with connection.transaction(), engine.joined(connection) as session:
            kept = engine.start(ECHO, "kept", session=session).run
        assert connection.execute("SHOW search_path").fetchone() == before

        with (
            pytest.raises(ZeroDivisionError),
            connection.transaction(),
            engine.joined(connection) as session,
        ):
            engine.start(ECHO, "rolled back", session=session)
            raise ZeroDivisionError

    assert [r.id for r in engine.list_runs()] == [kept.id]
    assert drain(engine, [ECHO]).executed == 1


@pytest.mark.sqlite_only
def test_sqlite_refuses_to_join_a_callers_transaction(engine: Engine) -> None:
    with pytest.raises(NotImplementedError, match="PostgreSQL only"), engine.joined(object()):
        pass


def test_concurrent_starts_with_one_key_create_one_run(engine: Engine) -> None:
    barrier = threading.Barrier(8)
    results: list[Any] = []

    def start() -> None:
        barrier.wait()
        try:
            results.append(engine.start(ECHO, {"same": True}, idempotency_key="race"))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert not [r for r in results if isinstance(r, BaseException)], results
    assert len(results) == 8
    assert sum(r.created for r in results) == 1
    assert len({r.run.id for r in results}) == 1
    assert len(engine.list_runs()) == 1


# ---------------------------------------------------------------------------- the spike's main path


def test_an_acquire_shaped_run_goes_through_every_kind_of_step(
    clocked: Engine, clock: FakeClock
) -> None:
    """submit, wait for the download signal, copy, register, retention sleep, cleanup."""
    def run(ctx: Any, source: str) -> Any:
        torrent = ctx.step("submit-download", lambda step: {"hash": f"hash-{source}"})
        signal = ctx.wait_for_signal("wait-download", f"download-done:{torrent['hash']}",
                                     timeout="1d")
        copied = ctx.step("copy-file", lambda step: {"dest": f"/lib/{source}.mkv"})
        ctx.step("register", lambda step: "registered")
        ctx.sleep("retention", "7d")
        ctx.step("cleanup", lambda step: "removed")
        return {"copied": copied, "signal": None if signal is None else signal.data}

    acquire = Workflow("acquire-shaped", "1", run)
    started = clocked.start(acquire, "d1").run
    drain(clocked, [acquire])
    assert clocked.get(started.id).status == RunStatus.WAITING
    [waiting] = clocked.runs_waiting_on("download-done:")
    assert waiting.signal_name == "download-done:hash-d1"

    assert clocked.signal("download-done:hash-d1", {"ok": True}).delivered_to == (started.id,)
    drain(clocked, [acquire])
    assert clocked.get(started.id).status == RunStatus.SLEEPING
    clock.advance(timedelta(days=7))
    drain(clocked, [acquire])

    done = clocked.get(started.id)
    assert done.status == RunStatus.SUCCEEDED
    assert done.output == {"copied": {"dest": "/lib/d1.mkv"}, "signal": {"ok": True}}
    assert [(s.name, s.kind, s.status) for s in clocked.steps(started.id)] == [
        ("submit-download", "step", "succeeded"),
        ("wait-download", "signal", "succeeded"),
        ("copy-file", "step", "succeeded"),
        ("register", "step", "succeeded"),
        ("retention", "sleep", "succeeded"),
        ("cleanup", "step", "succeeded"),
    ]
    assert len(clocked.attempts(started.id)) == 4  # steps only, one attempt each
