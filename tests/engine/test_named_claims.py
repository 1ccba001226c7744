"""PostgreSQL names a new run in its notification, and one worker claims exactly that run: the
claims per run stay the same however many workers listen (issue 15). The poll still finds a
run whose notification nobody acted on."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
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
from umt.engine import Engine, RunStatus, Worker, WorkerOptions, Workflow
from umt.engine.store.database import Session, due_run_payload
from umt.engine.store.queries import Query

pytestmark = pytest.mark.postgres_only

CLAIMS = ("claim_runs", "claim_notified_runs")
#: No poll within a test: only notifications (and each worker's first look) bring claims.
NO_POLL = WorkerOptions(concurrency=50, lease=FAST.lease, poll_interval=timedelta(minutes=10),
                        grace_period=FAST.grace_period)


class ClaimCounter:
    """Counts the statements of umt's claim queries, from every worker of this process."""

    def __init__(self) -> None:
        self.calls = dict.fromkeys(CLAIMS, 0)
        self._lock = threading.Lock()

    def total(self) -> int:
        with self._lock:
            return sum(self.calls.values())


@pytest.fixture
def claims(monkeypatch: pytest.MonkeyPatch) -> Iterator[ClaimCounter]:
    counter = ClaimCounter()
    execute = Session.execute

    def counting(self: Session, query: Query,
                 params: Mapping[str, object] | None = None) -> list[Any]:
        if query.name in counter.calls:
            with counter._lock:
                counter.calls[query.name] += 1
        return execute(self, query, params)

    monkeypatch.setattr(Session, "execute", counting)
    yield counter


def _recording(effects: Effects) -> Workflow:
    def run(ctx: Any, value: Any) -> Any:
        return ctx.step("only", lambda step: effects.record(step) or value)

    return Workflow("named-claims", "1", run)


def _fleet_known(workers: list[Worker]) -> bool:
    ids = {worker.id for worker in workers}
    return all(set(worker._fleet) >= ids for worker in workers)


def test_three_workers_run_a_burst_once_each_with_about_one_claim_per_run(
    engine: Engine, effects: Effects, claims: ClaimCounter,
) -> None:
    workflow = _recording(effects)
    workers = [engine.worker([workflow], NO_POLL) for _ in range(3)]
    threads = [WorkerThread(worker).start() for worker in workers]
    try:
        wait_until(lambda: _fleet_known(workers), message="every worker knows the others")
        before = claims.total()
        runs = [engine.start(workflow, n).run for n in range(60)]
        for run in runs:
            wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
        during = claims.total() - before
    finally:
        stop_workers(threads)
    assert sorted(row["run_id"] for row in effects.rows()) == sorted(run.id for run in runs)
    # One claim per run at most (a burst may name several runs to one claim), plus a few for
    # a worker that re-read the others or looked once more (waking everyone: ~3 per run).
    assert during <= len(runs) + 6, claims.calls
    executed = {worker.id: worker._report.executed for worker in workers}
    assert all(executed.values()), f"a worker was never named a run: {executed}"


def test_a_run_whose_notification_was_missed_is_claimed_by_the_poll(
    engine: Engine, effects: Effects, claims: ClaimCounter,
) -> None:
    workflow = _recording(effects)
    polling = WorkerOptions(lease=FAST.lease, poll_interval=timedelta(seconds=0.5),
                            grace_period=FAST.grace_period)
    worker = engine.worker([workflow], polling)
    serving = WorkerThread(worker).start()
    try:
        wait_until(lambda: worker.id in worker._fleet, message="the worker is serving")
        run_id = str(uuid.uuid4())
        now = datetime.now(UTC)
        with engine.database.operation() as session:  # notifies a channel nobody listens on
            session.row(
                "insert_run", id=run_id, workflow_name=workflow.name,
                workflow_version=workflow.version, workflow_key=workflow.key, input="1",
                idempotency_key=None, compensable=False, due_at=now, now=now,
                work_channel="umt.nobody", work_payload=due_run_payload(run_id, workflow.key),
            )
        wait_for_status(engine, run_id, RunStatus.SUCCEEDED)
    finally:
        serving.stop()
    assert effects.count(run_id) == 1
    assert claims.calls["claim_notified_runs"] == 0, claims.calls


def test_runs_named_to_a_worker_that_is_gone_are_claimed_by_the_poll(
    engine: Engine, effects: Effects,
) -> None:
    workflow = _recording(effects)
    gone = str(uuid.uuid4())  # registered, never stopped, not listening: a crashed worker
    engine.store.register_worker(gone, host_key="elsewhere/boot/1", hostname="elsewhere",
                                 pid=1, process_start="", workflows=[workflow.key])
    polling = WorkerOptions(lease=FAST.lease, poll_interval=timedelta(seconds=0.3),
                            grace_period=FAST.grace_period)
    worker = engine.worker([workflow], polling)
    serving = WorkerThread(worker).start()
    try:
        wait_until(lambda: gone in worker._fleet, message="the worker knows the gone one")
        runs = [engine.start(workflow, n).run for n in range(8)]
        for run in runs:
            wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
    finally:
        serving.stop()
    assert sorted(row["run_id"] for row in effects.rows()) == sorted(run.id for run in runs)
