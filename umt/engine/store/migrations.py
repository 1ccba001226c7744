"""Versioned, idempotent schema migrations, applied under a lock.

Each component (the engine, and any business schema that shares the database) has its own
numbered files ``migrations/<dialect>/NNNN_name.sql``; both dialects use the same numbers.
Applied versions are recorded in ``schema_migrations``. A database that holds a version this
code does not know was migrated by a newer umt and is refused untouched.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from umt.engine.clock import SYSTEM_CLOCK, Clock
from umt.engine.errors import SchemaNotReady, SchemaTooNew
from umt.engine.store.database import Database, Session

_FILENAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class MigrationSet:
    component: str
    package: str
    #: Index into the PostgreSQL database's schemas where this component's tables live.
    schema_index: int = 0


@dataclass(frozen=True)
class Migration:
    component: str
    version: int
    name: str
    sql: str = field(repr=False)

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class ComponentState:
    component: str
    applied: int
    known: int

    @property
    def current(self) -> bool:
        return self.applied == self.known


ENGINE_MIGRATIONS = MigrationSet("engine", "umt.engine.store")
_LOCK_NAME = "umt-migrations"


def load_migrations(migration_set: MigrationSet, dialect: str) -> list[Migration]:
    folder = resources.files(migration_set.package).joinpath("migrations", dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILENAME.match(entry.name)
        if match:
            found.append(
                Migration(
                    migration_set.component, int(match.group(1)), match.group(2),
                    entry.read_text(encoding="utf-8"),
                )
            )
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"{migration_set.package}: migrations must be numbered 1, 2, 3, …")
    return found


def schema_state(database: Database, sets: list[MigrationSet]) -> list[ComponentState]:
    """What each component has applied and what this code knows. Writes nothing."""
    with database.autocommit() as session:
        applied = _applied_versions(session)
    return [
        ComponentState(
            s.component, applied.get(s.component, 0), len(load_migrations(s, database.dialect))
        )
        for s in sets
    ]


def require_current(database: Database, sets: list[MigrationSet]) -> None:
    for state in schema_state(database, sets):
        _refuse_newer(state)
        if state.applied < state.known:
            raise SchemaNotReady(
                f"the {state.component} schema in {database.describe()} is at version "
                f"{state.applied}, this umt needs {state.known}: run `umt db migrate`"
            )


def migrate(
    database: Database, sets: list[MigrationSet], clock: Clock = SYSTEM_CLOCK
) -> list[Migration]:
    """Apply every missing migration of every set; safe to run concurrently and repeatedly."""
    # Dispatch on the dialect name: importing the PostgreSQL module (psycopg) costs a
    # command-line start on the embedded SQLite database a tenth of a second.
    if database.dialect == "postgresql":
        from umt.engine.store.postgres import PostgresDatabase

        assert isinstance(database, PostgresDatabase)
        return _migrate_postgres(database, sets, clock)
    if database.dialect == "sqlite":
        from umt.engine.store.sqlite import SqliteDatabase

        assert isinstance(database, SqliteDatabase)
        return _migrate_sqlite(database, sets, clock)
    raise TypeError(f"cannot migrate a {type(database).__name__}")


def _applied_versions(session: Session) -> dict[str, int]:
    present = session.row("migrations_table_present")
    if not present or not present["present"]:
        return {}
    applied: dict[str, int] = {}
    for row in session.rows("applied_migrations"):
        applied[row["component"]] = max(applied.get(row["component"], 0), row["version"])
    return applied


def _refuse_newer(state: ComponentState) -> None:
    if state.applied > state.known:
        raise SchemaTooNew(
            f"the {state.component} schema is at version {state.applied}, newer than this "
            f"umt knows ({state.known}); upgrade umt — nothing was changed"
        )


def _pending(
    session: Session, sets: list[MigrationSet], dialect: str
) -> list[tuple[MigrationSet, Migration]]:
    applied = _applied_versions(session)
    pending: list[tuple[MigrationSet, Migration]] = []
    for migration_set in sets:
        migrations = load_migrations(migration_set, dialect)
        done = applied.get(migration_set.component, 0)
        _refuse_newer(ComponentState(migration_set.component, done, len(migrations)))
        pending.extend((migration_set, m) for m in migrations if m.version > done)
    return pending


def _migrate_postgres(database: Any, sets: list[MigrationSet], clock: Clock) -> list[Migration]:
    from psycopg import sql

    from umt.engine.store.database import Session
    from umt.engine.store.driver_errors import postgres_errors
    from umt.engine.store.postgres import _CODEC

    applied: list[Migration] = []
    with database.raw_connection() as connection, postgres_errors(database.describe()):
        connection.autocommit = True
        session = Session(connection, _CODEC, database.queries, database.dialect)
        session.rows("lock_migrations", lock_name=_LOCK_NAME)
        try:
            _set_search_path(connection, database.schemas)
            # Refuses a schema from a newer umt before anything is created.
            pending = _pending(session, sets, database.dialect)
            for schema in database.schemas:
                connection.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
            session.rows("create_migrations_table")
            for migration_set, migration in pending:
                with connection.transaction():
                    target = database.schemas[migration_set.schema_index]
                    _set_search_path(connection, (target, *database.schemas), local=True)
                    connection.execute(sql.SQL(migration.sql))
                    _set_search_path(connection, database.schemas, local=True)
                    _record(session, migration, clock)
                applied.append(migration)
        finally:
            session.rows("unlock_migrations", lock_name=_LOCK_NAME)
    return applied


def _set_search_path(connection: Any, schemas: tuple[str, ...], *, local: bool = False) -> None:
    from psycopg import sql

    names = sql.SQL(", ").join(sql.Identifier(schema) for schema in dict.fromkeys(schemas))
    statement = "SET LOCAL search_path TO {}" if local else "SET search_path TO {}"
    connection.execute(sql.SQL(statement).format(names))


def _migrate_sqlite(database: Any, sets: list[MigrationSet], clock: Clock) -> list[Migration]:
    # Every command opens the embedded database through here: on a current schema a read
    # answers, so a command never takes the write lock (and never queues behind a worker's
    # commit) to learn that nothing is to be done. What is pending is read again under the lock.
    with database.autocommit() as session:
        if not _pending(session, sets, database.dialect):
            return []
    applied: list[Migration] = []
    with database.transaction() as session:
        session.rows("create_migrations_table")
        for _migration_set, migration in _pending(session, sets, database.dialect):
            for statement in split_sqlite_script(migration.sql):
                session.execute_text(statement)
            _record(session, migration, clock)
            applied.append(migration)
    return applied


def _record(session: Session, migration: Migration, clock: Clock) -> None:
    session.rows(
        "record_migration", component=migration.component, version=migration.version,
        name=migration.name, checksum=migration.checksum, now=clock.now(),
    )


def split_sqlite_script(script: str) -> list[str]:
    """Split a migration file into statements the way the sqlite3 shell does."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        not line.strip() or line.strip().startswith("--") for line in pending.splitlines()
    ):
        raise ValueError("migration ends with an incomplete statement")
    return statements
