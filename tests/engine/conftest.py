"""The engine's contract suite runs on both backends: the ``engine`` fixture is parametrized over
an SQLite file and a fresh PostgreSQL database. Tests that need what SQLite cannot do
(LISTEN/NOTIFY, workers on several hosts) carry ``@pytest.mark.postgres_only``; tests of SQLite's
limits carry ``@pytest.mark.sqlite_only``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from umt.engine import (
    DrainReport,
    Engine,
    FakeClock,
    Run,
    Worker,
    WorkerOptions,
    Workflow,
    open_database,
)

T = TypeVar("T")

BACKENDS = ["sqlite", "postgresql"]

#: Small numbers so that leases, polls and grace periods play out within a test.
FAST = WorkerOptions(
    concurrency=4,
    lease=timedelta(seconds=2),
    poll_interval=timedelta(seconds=0.2),
    grace_period=timedelta(seconds=1),
    progress_interval=timedelta(seconds=0),
)


def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'engine.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn; ``postgres_only`` / ``sqlite_only`` tests are generated for their
    backend alone (tests/support/skips.py)."""
    name: str = request.param
    return name


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return database_url(backend, request, tmp_path)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """A migrated engine on a database of its own; closed afterwards."""
    engine = Engine(open_database(db_url))
    try:
        engine.migrate()
        yield engine
    finally:
        engine.close()


@pytest.fixture
def effects(engine: Engine) -> Effects:
    """A business table in the engine's database where step bodies count what they did."""
    return Effects(engine)


class Effects:
    """``effects(run_id, step, attempt, lease_epoch, note)``: one row per side effect."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.queries = engine.database.query_set("tests.engine")
        with engine.database.transaction() as session:
            session.execute(self.queries["create_effects"])

    def record(self, step: Any, note: str = "") -> None:
        """Buffered in the step's fenced transaction: commits with the step's result or never."""
        step.step_transaction.execute(self.queries["insert_effect"], self._params(step, note))

    def record_now(self, step: Any, note: str = "") -> None:
        """Commits at once, only while the step still holds its run."""
        with step.transaction() as session:
            session.execute(self.queries["insert_effect"], self._params(step, note))

    def _params(self, step: Any, note: str) -> dict[str, object]:
        return {"run_id": step.run_id, "step": step.step_name, "attempt": step.attempt,
                "lease_epoch": step.lease_epoch, "note": note}

    def rows(self, run_id: str | None = None) -> list[dict[str, Any]]:
        with self.engine.database.autocommit() as session:
            return session.execute(self.queries["effects"], {"run_id": run_id})

    def count(self, run_id: str | None = None, step: str | None = None) -> int:
        return sum(1 for row in self.rows(run_id) if step is None or row["step"] == step)


class WorkerThread:
    """A worker serving in a thread until stopped; ``stop()`` waits for it to exit."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        try:
            self.worker.run(self.stop_event)
        except BaseException as exc:
            self.error = exc

    def start(self) -> WorkerThread:
        self.thread.start()
        return self

    def stop(self, timeout: float = 20.0) -> None:
        stop_workers([self], timeout)


def stop_workers(workers: list[WorkerThread], timeout: float = 20.0) -> None:
    """Stops every worker, then fails on the first one still alive or that crashed while serving:
    a worker thread that died must fail its test even when another worker finished the job."""
    for worker in workers:
        worker.stop_event.set()
    for worker in workers:
        worker.thread.join(timeout)
    alive = [worker.thread.name for worker in workers if worker.thread.is_alive()]
    assert not alive, f"worker thread(s) did not stop within {timeout}s: {alive}"
    for worker in workers:
        if worker.error is not None:
            raise AssertionError(f"a worker thread crashed: {worker.error!r}") from worker.error


class IdleWaits(threading.Event):
    """Stands in for a worker's wake-up event and records its idle waits (those of at least half
    the poll interval: a worker waits until its next general look, which a claim of a run a
    notification named does not move): ``idle`` is set while one is under way, ``ended`` holds
    what each returned (True: woken, False: the wait ran out)."""

    def __init__(self, poll: float) -> None:
        super().__init__()
        self.poll = poll
        self.idle = threading.Event()
        self.ended: list[bool] = []

    @classmethod
    def watch(cls, worker: Worker) -> IdleWaits:
        """Installs itself in ``worker`` (not started yet)."""
        waits = cls(worker.options.poll_interval.total_seconds())
        worker._wake = waits
        return waits

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None or timeout < self.poll / 2:
            return super().wait(timeout)
        self.idle.set()
        try:
            woken = super().wait(timeout)
        finally:
            self.idle.clear()
        self.ended.append(woken)
        return woken


@pytest.fixture
def run_worker(engine: Engine) -> Iterator[Callable[..., WorkerThread]]:
    """Starts workers in threads; every one of them is stopped after the test."""
    started: list[WorkerThread] = []

    def start(workflows: list[Workflow], options: WorkerOptions = FAST) -> WorkerThread:
        worker = WorkerThread(engine.worker(workflows, options)).start()
        started.append(worker)
        return worker

    yield start
    stop_workers(started)


def wait_until(
    condition: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.05,
    message: str = "condition",
) -> T:
    """Polls ``condition`` until it returns something truthy; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} not reached within {timeout}s (last: {value!r})")
        time.sleep(interval)


def wait_for_status(engine: Engine, run_id: str, *statuses: str, timeout: float = 20.0) -> Run:
    def reached() -> Run | None:
        run = engine.get(run_id)
        return run if run.status in statuses else None

    return wait_until(reached, timeout, message=f"run {run_id} in {statuses}")


def settled(engine: Engine, run_id: str, timeout: float = 20.0) -> Run:
    """Waits until the run is final and done compensating."""
    def done() -> Run | None:
        run = engine.get(run_id)
        busy = run.compensation in ("pending", "running")
        return run if run.finished and not busy else None

    return wait_until(done, timeout, message=f"run {run_id} settled")


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when told to, starting now."""
    return FakeClock(datetime.now(UTC))


@pytest.fixture
def clocked(engine: Engine, clock: FakeClock) -> Engine:
    """The same database as ``engine``, seen through ``clock`` (workers made by it use it too)."""
    return Engine(engine.database, clock=clock)


def drain(engine: Engine, workflows: list[Workflow], options: WorkerOptions = FAST) -> DrainReport:
    """One ``umt resume``-style pass: executes what is due until nothing is."""
    return engine.worker(workflows, options).drain()
