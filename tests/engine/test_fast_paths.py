"""PostgreSQL's one-statement forms of the hot operations (``Database.fast_path``): they write
what the transactional path writes, and they notify like it. The transactional path itself is
what SQLite runs, and what PostgreSQL falls back to when a fence fails (test_fencing)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.engine.conftest import Effects, drain
from umt.engine import Engine, FakeClock, RunStatus, Workflow
from umt.engine.store.database import WORK_CHANNEL, WORKERS_CHANNEL, Database, Row, Session
from umt.engine.store.postgres import PostgresDatabase
from umt.engine.store.store import Store

pytestmark = pytest.mark.postgres_only


class TransactionalPostgres(PostgresDatabase):
    """PostgreSQL without its one-statement forms: every operation takes the transactional
    path, as on SQLite."""

    def fast_path(
        self, query_name: str, params: Mapping[str, object], session: Session | None = None
    ) -> list[Row] | None:
        return None


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


def test_the_fast_paths_write_what_the_transactional_path_writes(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    effects = Effects(engine)
    workflow = _workflow(effects)
    fast = Engine(engine.database, clock=clock)
    slow = Engine(TransactionalPostgres(db_url), clock=clock)
    try:
        histories = [_history(e, _play(e, clock, workflow, key))
                     for e, key in [(fast, "a"), (slow, "b")]]
    finally:
        slow.close()
    assert histories[0]["status"] == RunStatus.SUCCEEDED
    assert histories[0]["output"] == {"second": ["v", {"n": 1}]}
    assert histories[0] == histories[1]
    assert histories[0]["steps"] == [
        ("first", "step", "succeeded", 1), ("middle", "step", "succeeded", 1),
        ("nap", "sleep", "succeeded", 0),
        ("go", "signal", "succeeded", 0), ("second", "step", "succeeded", 1),
    ]
    assert effects.count() == 2  # one per run, committed with the step's result


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "transactional"])
def test_a_run_claimed_before_its_timer_is_parked_again(
    engine: Engine, db_url: str, fast: bool
) -> None:
    """Only a worker whose clock is ahead claims a run before its timer (park_again)."""
    database: Database = engine.database if fast else TransactionalPostgres(db_url)
    nap = Workflow("nap", "1", lambda ctx, _: ctx.sleep("nap", timedelta(hours=1)))
    try:
        run = Engine(database).start(nap).run
        drain(Engine(database), [nap])
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
    finally:
        if not fast:
            database.close()


def _listening(db_url: str, database: PostgresDatabase) -> Iterator[psycopg.Connection[Any]]:
    connection = psycopg.connect(db_url, autocommit=True)
    for name in (WORK_CHANNEL, WORKERS_CHANNEL):
        connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(database.channel(name))))
    yield connection
    connection.close()


def _received(connection: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    return [(n.channel.rsplit(".", 1)[-1], n.payload)
            for n in connection.notifies(timeout=0.5)]


def test_the_fast_paths_notify(engine: Engine, db_url: str, clock: FakeClock) -> None:
    database = engine.database
    assert isinstance(database, PostgresDatabase)
    workflow = _workflow(Effects(engine))
    clocked = Engine(database, clock=clock)
    listener = _listening(db_url, database)
    connection = next(listener)
    try:
        run = clocked.start(workflow, "v").run
        assert _received(connection) == [("work", workflow.key)]
        worker = clocked.worker([workflow])
        worker.drain()  # parks in its sleep: the new due time wakes other workers
        received = _received(connection)
        assert ("workers", worker.identity.host_key) in received
        assert received[-1] == ("work", workflow.key)
        clock.advance(timedelta(seconds=11))
        clocked.worker([workflow]).drain()
        _received(connection)
        clocked.signal(f"go:{run.id}")
        assert _received(connection) == [("work", workflow.key)]
    finally:
        next(listener, None)
