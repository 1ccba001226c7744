"""The engine's front door: open a database, start/inspect/cancel runs, signal, make workers."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from umt.engine.clock import SYSTEM_CLOCK, Clock
from umt.engine.hostinfo import process_alive
from umt.engine.models import (
    Attempt,
    LiveWorker,
    Run,
    RunsPage,
    SignalResult,
    StartResult,
    Step,
    WaitingRun,
)
from umt.engine.store.database import Database, Session
from umt.engine.store.migrations import (
    ENGINE_MIGRATIONS,
    ComponentState,
    Migration,
    MigrationSet,
    migrate,
    require_current,
    schema_state,
)
from umt.engine.store.store import NO_WORKER, ChangeMarker, Store
from umt.engine.store.urls import parse_database_url
from umt.engine.worker import Worker, WorkerOptions
from umt.engine.workflow import Registry, Workflow


def open_database(
    url: str,
    *,
    schemas: Sequence[str] = ("umt",),
    pool_size: int = 4,
    sqlite_poll_interval: float = 0.2,
    connect_timeout: float = 5.0,
) -> Database:
    """A database from a URL: ``postgresql://…`` or ``sqlite:///path``."""
    target = parse_database_url(url)
    if target.kind == "postgresql":
        from umt.engine.store.postgres import PostgresDatabase

        return PostgresDatabase(
            url, schemas=schemas, pool_size=pool_size, connect_timeout=connect_timeout
        )
    from umt.engine.store.sqlite import SqliteDatabase

    assert target.sqlite_path is not None
    return SqliteDatabase(target.sqlite_path, poll_interval=sqlite_poll_interval)


class Engine:
    def __init__(
        self,
        database: Database,
        *,
        clock: Clock = SYSTEM_CLOCK,
        signal_ttl: timedelta = timedelta(days=7),
        migration_sets: Sequence[MigrationSet] = (),
    ) -> None:
        self.database = database
        self.clock = clock
        self.store = Store(database, clock, signal_ttl=signal_ttl)
        self.migration_sets = [ENGINE_MIGRATIONS, *migration_sets]

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema

    def migrate(self) -> list[Migration]:
        return migrate(self.database, self.migration_sets, self.clock)

    def require_schema(self) -> None:
        """Raises ``SchemaNotReady`` / ``SchemaTooNew`` unless the schema is exactly current."""
        require_current(self.database, self.migration_sets)

    def schema_state(self) -> list[ComponentState]:
        return schema_state(self.database, self.migration_sets)

    # ------------------------------------------------------------------ runs

    def start(
        self,
        workflow: Workflow,
        input_value: Any = None,
        *,
        idempotency_key: str | None = None,
        start_at: datetime | None = None,
        session: Session | None = None,
    ) -> StartResult:
        """Creates a run (or returns the one holding ``idempotency_key`` if the input is equal).

        With ``session`` (see ``joined``) the run is created in the caller's transaction and
        exists only if that transaction commits.
        """
        return self.store.create_run(
            workflow=workflow.name, version=workflow.version, input_value=input_value,
            idempotency_key=idempotency_key, compensable=workflow.compensate is not None,
            start_at=start_at, session=session,
        )

    @contextmanager
    def joined(self, connection: Any) -> Iterator[Session]:
        """A session on the caller's own connection, inside the caller's transaction."""
        with self.database.join(connection) as session:
            yield session

    def get(self, run_id: str) -> Run:
        return self.store.get_run(run_id)

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 50
    ) -> list[Run]:
        return self.store.list_runs(status=status, workflow=workflow, limit=limit)

    def runs_page(
        self, *, status: str | None = None, search: str | None = None,
        before: tuple[datetime, str] | None = None, limit: int = 50,
    ) -> RunsPage:
        """Runs newest first, ``limit`` at a time: pass the page's ``next_key`` as ``before`` to
        get the next one. ``search`` matches the title or the info-hash (any part, any case)."""
        return self.store.runs_page(status=status, search=search, before=before, limit=limit)

    def steps(self, run_id: str) -> list[Step]:
        return self.store.steps(run_id)

    def attempts(self, run_id: str) -> list[Attempt]:
        return self.store.attempts(run_id)

    def running_attempts(self, run_ids: Sequence[str]) -> list[Attempt]:
        """The attempts being executed now in these runs (with their progress)."""
        return self.store.running_attempts(run_ids)

    def cancel(self, run_id: str) -> Run:
        return self.store.cancel_run(run_id)

    def signal(
        self,
        name: str,
        data: Any = None,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        ttl: timedelta | None = None,
    ) -> SignalResult:
        """Delivers to every run waiting on ``name`` now, or keeps it for the first run to wait."""
        return self.store.send_signal(
            name, data, run_id=run_id, idempotency_key=idempotency_key, ttl=ttl
        )

    def runs_waiting_on(self, prefix: str) -> list[WaitingRun]:
        return self.store.runs_waiting_on(prefix)

    def annotate(self, run_id: str, detail: str | None) -> None:
        """Sets the line shown with a run's status (e.g. what its torrent is doing)."""
        self.store.annotate(run_id, detail)

    def wait(self, run_id: str, timeout: float, *, poll: float = 0.2) -> Run:
        """Polls until the run is final (and done compensating) or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get(run_id)
            settled = run.finished and run.compensation not in ("pending", "running")
            if settled or time.monotonic() >= deadline:
                return run
            time.sleep(poll)

    def reap_dead_workers(self, host_key: str) -> list[str]:
        """Takes back the runs of workers on this host whose process is gone."""
        dead = [
            worker.id
            for worker in self.store.live_workers_on_host(NO_WORKER, host_key)
            if not process_alive(worker.pid, worker.process_start)
        ]
        return self.store.reclaim_from_dead_workers(dead)

    def live_workers(self) -> list[LiveWorker]:
        return self.store.live_workers()

    def change_marker(self, workflow_keys: Sequence[str]) -> ChangeMarker:
        """PostgreSQL only: what a live page watches besides notifications (on SQLite it
        watches ``PRAGMA data_version``): a value that changes whenever a writing transaction
        begins or ends, whether a step is executing now, and when the next run of
        ``workflow_keys`` becomes due."""
        return self.store.change_marker(workflow_keys)

    def collect_garbage(self, older_than: timedelta) -> dict[str, int]:
        return self.store.collect_garbage(older_than)

    # ------------------------------------------------------------------ workers

    def worker(
        self, workflows: Registry | Sequence[Workflow], options: WorkerOptions | None = None
    ) -> Worker:
        registry = workflows if isinstance(workflows, Registry) else Registry(workflows)
        return Worker(self.store, registry, options, clock=self.clock)
