"""The hot operations are one named query per dialect (``Database.operation``): PostgreSQL's
one-statement forms write what SQLite's blocks of statements write, and they notify. What they
do when a fence fails is in test_fencing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.engine.conftest import Effects, drain
from umt.engine import Engine, FakeClock, RunStatus, Workflow, open_database
from umt.engine.errors import StoreError
from umt.engine.store.database import WORK_CHANNEL, WORKERS_CHANNEL, due_run_payload
from umt.engine.store.postgres import PostgresDatabase
from umt.engine.store.store import Store


def _workflow(effects: Effects) -> Workflow:
    def body(ctx: Any, value: Any) -> Any:
        def recorded(step: Any) -> Any:
            effects.record(step)
            return value

        first = ctx.step("first", recorded)
        ctx.step("middle", lambda step: None)  # commits with the start of the next step
        ctx.sleep("nap", timedelta(seconds=10))
        received = ctx.wait_for_signal("go", f"go:{ctx.run_id}", timeout=timedelta(hours=1))
        second = ctx.step("second", lambda step: [first, received.data if received else None])
        return {"second": second}

    return Workflow("fast-or-not", "1", body)


def _history(engine: Engine, run_id: str) -> dict[str, Any]:
    run = engine.get(run_id)
    return {
        "status": run.status, "output": run.output,
        "steps": [(s.name, s.kind, s.status, s.attempts) for s in engine.steps(run_id)],
        "attempts": [(a.step_name, a.attempt, a.status) for a in engine.attempts(run_id)],
    }


def _play(engine: Engine, clock: FakeClock, workflow: Workflow, key: str) -> str:
    run = engine.start(workflow, "v", idempotency_key=key).run
    assert engine.start(workflow, "v", idempotency_key=key).run.id == run.id
    drain(engine, [workflow])
    assert engine.get(run.id).status == RunStatus.SLEEPING
    drain(engine, [workflow])  # not due yet: nothing happens
    clock.advance(timedelta(seconds=11))
    drain(engine, [workflow])
    assert engine.get(run.id).status == RunStatus.WAITING
    sent = engine.signal(f"go:{run.id}", {"n": 1})
    assert sent.delivered_to == (run.id,)
    assert engine.signal(f"go:{run.id}", {"n": 2}).kept  # nobody waits any more
    drain(engine, [workflow])
    return run.id


@pytest.mark.postgres_only
def test_both_dialects_write_the_same(engine: Engine, tmp_path: Path, clock: FakeClock) -> None:
    postgres = Engine(engine.database, clock=clock)
    sqlite = Engine(open_database(f"sqlite:///{tmp_path / 'other.db'}"), clock=clock)
    try:
        sqlite.migrate()
        counted = [Effects(postgres), Effects(sqlite)]
        histories = [_history(e, _play(e, clock, _workflow(effects), key))
                     for e, effects, key in [(postgres, counted[0], "a"),
                                             (sqlite, counted[1], "b")]]
        assert [effects.count() for effects in counted] == [1, 1]
    finally:
        sqlite.close()
    assert histories[0]["status"] == RunStatus.SUCCEEDED
    assert histories[0]["output"] == {"second": ["v", {"n": 1}]}
    assert histories[0] == histories[1]
    assert histories[0]["steps"] == [
        ("first", "step", "succeeded", 1), ("middle", "step", "succeeded", 1),
        ("nap", "sleep", "succeeded", 0),
        ("go", "signal", "succeeded", 0), ("second", "step", "succeeded", 1),
    ]


def test_a_run_claimed_before_its_timer_is_parked_again(engine: Engine) -> None:
    """Only a worker whose clock is ahead claims a run before its timer (park_again)."""
    database = engine.database
    nap = Workflow("nap", "1", lambda ctx, _: ctx.sleep("nap", timedelta(hours=1)))
    run = engine.start(nap).run
    drain(engine, [nap])
    parked = engine.get(run.id)
    assert parked.status == RunStatus.SLEEPING and parked.due_at is not None
    ahead = Store(database, FakeClock(datetime.now(UTC) + timedelta(hours=2)))
    [claim] = ahead.claim(str(uuid.uuid4()), [nap.key], limit=1, lease=timedelta(minutes=1))
    assert claim.steps[0]["status"] == "sleeping"
    Store(database).park_again(claim.fence, RunStatus.SLEEPING, parked.due_at)
    again = engine.get(run.id)
    assert (again.status, again.due_at, again.lease_owner) == (
        RunStatus.SLEEPING, parked.due_at, None)
    assert again.lease_epoch == parked.lease_epoch + 1


def test_an_operation_of_several_statements_is_all_or_nothing(
    engine: Engine, effects: Effects
) -> None:
    """On PostgreSQL such a query is pipelined in autocommit (one implicit transaction)."""
    query = effects.queries["insert_effect_then_refuse"]
    with pytest.raises(StoreError), engine.database.operation() as session:
        session.execute(query, {"run_id": "r"})
    assert effects.rows("r") == []
    with engine.database.operation() as session:  # the connection serves the next operation
        session.execute(effects.queries["insert_effect"], {
            "run_id": "r", "step": "s", "attempt": 1, "lease_epoch": 0, "note": ""})
    assert [row["step"] for row in effects.rows("r")] == ["s"]


def _listening(db_url: str, database: PostgresDatabase) -> Iterator[psycopg.Connection[Any]]:
    connection = psycopg.connect(db_url, autocommit=True)
    for name in (WORK_CHANNEL, WORKERS_CHANNEL):
        connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(database.channel(name))))
    yield connection
    connection.close()


def _received(connection: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    return [(n.channel.rsplit(".", 1)[-1], n.payload)
            for n in connection.notifies(timeout=0.5)]


@pytest.mark.postgres_only
def test_the_hot_operations_notify(engine: Engine, db_url: str, clock: FakeClock) -> None:
    database = engine.database
    assert isinstance(database, PostgresDatabase)
    workflow = _workflow(Effects(engine))
    clocked = Engine(database, clock=clock)
    listener = _listening(db_url, database)
    connection = next(listener)
    try:
        run = clocked.start(workflow, "v").run
        assert _received(connection) == [("work", due_run_payload(run.id, workflow.key))]
        worker = clocked.worker([workflow])
        worker.drain()  # parks in its sleep: the new due time wakes other workers
        received = _received(connection)
        # Registered, then stopped: other workers re-read who claims the runs named to them.
        assert received.count(("workers", worker.identity.host_key)) == 2
        assert ("work", workflow.key) in received
        clock.advance(timedelta(seconds=11))
        clocked.worker([workflow]).drain()
        _received(connection)
        clocked.signal(f"go:{run.id}")
        assert _received(connection) == [("work", workflow.key)]
    finally:
        next(listener, None)
