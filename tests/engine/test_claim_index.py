"""A claim costs the same with 100,000 sleeping runs as with 10: its plan uses ``runs_due``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.engine.conftest import drain
from umt.engine import Engine, RunStatus, Workflow
from umt.engine.store.queries import Query

SLEEPING = 100_000
SLEEPER = Workflow("sleeper", "1", lambda ctx, _: ctx.step("wake", lambda step: "awake"))


def _fill(engine: Engine) -> None:
    queries = engine.database.query_set("tests.engine")
    now = engine.clock.now()
    with engine.database.transaction() as session:
        session.execute(queries["insert_sleeping_runs"],
                        {"count": SLEEPING, "wake_at": now + timedelta(days=1), "now": now})
    with engine.database.autocommit() as session:
        session.execute(queries["analyze_runs"])


def _plan(engine: Engine, query: Query, params: dict[str, Any]) -> str:
    with engine.database.autocommit() as session:
        rows = session.execute(query, params)
    if engine.database.dialect == "postgresql":
        return "\n".join(row["QUERY PLAN"] for row in rows)
    return "\n".join(row["detail"] for row in rows)


def _explained(engine: Engine, name: str) -> Query:
    """``EXPLAIN`` of one of the engine's own queries (PostgreSQL and SQLite spell it alike
    enough: SQLite's EXPLAIN QUERY PLAN)."""
    prefix = "EXPLAIN " if engine.database.dialect == "postgresql" else "EXPLAIN QUERY PLAN "
    query = engine.database.queries[name]
    # every statement of the query (SQLite writes a claim as a few) is explained, none is run
    return Query(f"explain_{name}", prefix + query.sql,
                 tuple(prefix + statement for statement in query.statements))


def test_the_claim_uses_the_due_index_among_100000_sleeping_runs(engine: Engine) -> None:
    _fill(engine)
    due = [engine.start(SLEEPER, n).run for n in range(10)]
    params = {"workflow_keys": [SLEEPER.key, "other@1"], "now": engine.clock.now(), "limit": 4,
              "held": [], "take_leased": True}

    plan = _plan(engine, engine.database.queries["explain_claim_candidates"], params)

    assert "runs_due" in plan, plan
    assert "Seq Scan" not in plan and "SCAN runs" not in plan, plan

    # the copy above must match the real claim, which is explained here too (not executed)
    now = engine.clock.now()
    claim = _plan(engine, _explained(engine, "claim_runs"), {
        **params, "worker_id": "00000000-0000-0000-0000-000000000001",
        "lease_expires_at": now + timedelta(seconds=30),
    })
    assert "runs_due" in claim, claim
    assert "Seq Scan on runs" not in claim and "SCAN runs" not in claim, claim

    next_due = _plan(engine, _explained(engine, "next_due"),
                     {"workflow_keys": [SLEEPER.key, "other@1"]})
    assert "runs_due" in next_due, next_due
    assert "Seq Scan" not in next_due and "SCAN runs" not in next_due, next_due

    # and the claim finds exactly the due ones
    report = drain(engine, [SLEEPER])
    assert report.executed == 10
    assert {engine.get(run.id).status for run in due} == {RunStatus.SUCCEEDED}
    assert engine.store.count_runs_by_status() == {"sleeping": SLEEPING, "succeeded": 10}
