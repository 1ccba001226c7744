"""The engine's front door: open a database, start/inspect/cancel runs, signal, make workers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from umt.engine.clock import SYSTEM_CLOCK, Clock
from umt.engine.models import StartResult
from umt.engine.store.database import Database, Session
from umt.engine.store.maintenance import Maintenance
from umt.engine.store.migrations import (
    ENGINE_MIGRATIONS,
    ComponentState,
    Migration,
    MigrationSet,
    migrate,
    require_current,
    schema_state,
)
from umt.engine.store.runs import Runs
from umt.engine.store.signals import Signals
from umt.engine.store.store import Store
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
    lease: timedelta | None = None,
) -> Database:
    """A database from a URL: ``postgresql://…`` or ``sqlite:///path``. On PostgreSQL,
    ``lease`` (the workers' lease) sets how fast a connection notices a dead peer."""
    target = parse_database_url(url)
    if target.kind == "postgresql":
        from umt.engine.store.postgres import DEFAULT_LEASE, PostgresDatabase

        return PostgresDatabase(
            url, schemas=schemas, pool_size=pool_size, connect_timeout=connect_timeout,
            lease=lease or DEFAULT_LEASE,
        )
    from umt.engine.store.sqlite import SqliteDatabase

    assert target.sqlite_path is not None
    return SqliteDatabase(target.sqlite_path, poll_interval=sqlite_poll_interval)


class Engine(Runs, Signals, Maintenance):
    """The public surface: runs, signals and housekeeping (inherited from the store's parts of
    those subjects), the schema, and workers."""

    def __init__(
        self,
        database: Database,
        *,
        clock: Clock = SYSTEM_CLOCK,
        signal_ttl: timedelta = timedelta(days=7),
        migration_sets: Sequence[MigrationSet] = (),
    ) -> None:
        super().__init__(database, clock, signal_ttl=signal_ttl)
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
        return self.create_run(
            workflow=workflow.name, version=workflow.version, input_value=input_value,
            idempotency_key=idempotency_key, compensable=workflow.compensate is not None,
            start_at=start_at, session=session,
        )

    @contextmanager
    def joined(self, connection: Any) -> Iterator[Session]:
        """A session on the caller's own connection, inside the caller's transaction."""
        with self.database.join(connection) as session:
            yield session

    # ------------------------------------------------------------------ workers

    def worker(
        self, workflows: Registry | Sequence[Workflow], options: WorkerOptions | None = None
    ) -> Worker:
        registry = workflows if isinstance(workflows, Registry) else Registry(workflows)
        return Worker(self.store, registry, options, clock=self.clock)
