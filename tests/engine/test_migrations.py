"""Versioned migrations: idempotent, safe to run concurrently, refusing a newer schema untouched,
and ending at the same logical schema on both backends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import database_url
from umt.engine import Engine, MigrationSet, SchemaNotReady, SchemaTooNew, open_database
from umt.engine.store.database import Database

BUSINESS = MigrationSet("business", "tests.engine.bizschema", schema_index=1)
SCHEMAS = ("umt", "business")


@pytest.fixture
def fresh(db_url: str) -> Iterator[Engine]:
    """An engine with the business component on an empty database, not migrated."""
    engine = Engine(open_database(db_url, schemas=SCHEMAS), migration_sets=[BUSINESS])
    try:
        yield engine
    finally:
        engine.close()


def tables(database: Database) -> list[str]:
    with database.autocommit() as session:
        return [row["table_name"] for row in session.rows("list_tables", schemas=list(SCHEMAS))]


def columns(database: Database) -> list[tuple[str, str]]:
    with database.autocommit() as session:
        rows = session.rows("list_columns", schemas=list(SCHEMAS))
    return [(row["table_name"], row["column_name"]) for row in rows]


def applied(database: Database) -> list[tuple[str, int]]:
    with database.autocommit() as session:
        return [(row["component"], row["version"]) for row in session.rows("applied_migrations")]


def snapshot(engine: Engine) -> dict[str, Any]:
    """Everything a migration could change: tables, columns, recorded versions, schemas."""
    state: dict[str, Any] = {
        "tables": tables(engine.database),
        "columns": columns(engine.database),
        "applied": applied(engine.database),
    }
    if engine.database.dialect == "postgresql":
        state["schemas"] = pg_schemas(engine)
    return state


def pg_schemas(engine: Engine) -> list[str]:
    import psycopg

    url = engine.database.url  # type: ignore[attr-defined]
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%'"
            " AND nspname <> 'information_schema' ORDER BY nspname"
        ).fetchall()
    return [row[0] for row in rows]


def test_an_unmigrated_database_is_refused_clearly(fresh: Engine) -> None:
    with pytest.raises(SchemaNotReady, match="umt db migrate"):
        fresh.require_schema()
    assert [(s.component, s.applied, s.known) for s in fresh.schema_state()] == [
        ("engine", 0, 2), ("business", 0, 2),
    ]


def test_migrate_applies_every_component_once(fresh: Engine) -> None:
    first = fresh.migrate()
    assert [(m.component, m.version) for m in first] == [
        ("engine", 1), ("engine", 2), ("business", 1), ("business", 2),
    ]
    fresh.require_schema()
    assert fresh.migrate() == []
    assert fresh.migrate() == []
    assert applied(fresh.database) == [
        ("business", 1), ("business", 2), ("engine", 1), ("engine", 2),
    ]
    assert all(s.current for s in fresh.schema_state())
    assert {"runs", "steps", "attempts", "signals", "workers", "catalog", "ledger"} <= set(
        tables(fresh.database)
    )


def test_a_new_component_is_added_to_a_migrated_database(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url(backend, request, tmp_path)
    with Engine(open_database(url, schemas=SCHEMAS)) as engine_only:
        assert {m.component for m in engine_only.migrate()} == {"engine"}
    with Engine(open_database(url, schemas=SCHEMAS), migration_sets=[BUSINESS]) as both:
        assert [(m.component, m.version) for m in both.migrate()] == [
            ("business", 1), ("business", 2),
        ]
        both.require_schema()


@pytest.mark.postgres_only
def test_business_tables_live_in_their_own_schema(fresh: Engine) -> None:
    fresh.migrate()
    with fresh.database.autocommit() as session:
        rows = session.rows("list_tables", schemas=list(SCHEMAS))
    where = {row["table_name"]: row["table_schema"] for row in rows}
    assert where["runs"] == "umt" and where["schema_migrations"] == "umt"
    assert where["catalog"] == "business" and where["ledger"] == "business"


def test_concurrent_migrations_apply_each_version_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url(backend, request, tmp_path)
    engines = [Engine(open_database(url, schemas=SCHEMAS), migration_sets=[BUSINESS])
               for _ in range(2)]
    barrier = threading.Barrier(len(engines))
    results: list[Any] = [None] * len(engines)

    def migrate(index: int) -> None:
        barrier.wait()
        try:
            results[index] = engines[index].migrate()
        except BaseException as exc:
            results[index] = exc

    threads = [threading.Thread(target=migrate, args=(i,)) for i in range(len(engines))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not [r for r in results if isinstance(r, BaseException)], results
        done = sorted((m.component, m.version) for r in results for m in r)
        assert done == [("business", 1), ("business", 2), ("engine", 1), ("engine", 2)]
        assert applied(engines[0].database) == done
        engines[1].require_schema()
    finally:
        for engine in engines:
            engine.close()


def test_a_schema_from_a_newer_umt_is_refused_and_left_untouched(
    fresh: Engine, db_url: str
) -> None:
    # A newer umt migrated the engine to version 999 and has no business component (yet): this
    # umt would create its schema and tables, but must not touch anything.
    with Engine(open_database(db_url)) as newer:
        newer.migrate()
        with newer.database.transaction() as session:
            session.rows("record_migration", component="engine", version=999,
                         name="from_the_future", checksum="x", now=newer.clock.now())
    before = snapshot(fresh)
    assert before["applied"] == [("engine", 1), ("engine", 2), ("engine", 999)]

    with pytest.raises(SchemaTooNew, match="newer") as refused:
        fresh.migrate()
    assert "upgrade umt" in str(refused.value)
    with pytest.raises(SchemaTooNew):
        fresh.require_schema()

    assert snapshot(fresh) == before
    assert "catalog" not in before["tables"]
    assert "business" not in before.get("schemas", [])


def test_both_backends_end_at_the_same_logical_schema(pg_url: str, tmp_path: Path) -> None:
    shapes = []
    for url in (pg_url, f"sqlite:///{tmp_path / 'same.db'}"):
        with Engine(open_database(url, schemas=SCHEMAS), migration_sets=[BUSINESS]) as engine:
            engine.migrate()
            shapes.append((tables(engine.database), columns(engine.database)))
    (pg_tables, pg_columns), (sqlite_tables, sqlite_columns) = shapes
    # PostgreSQL lists by schema first; the set of names is what must agree
    assert sorted(pg_tables) == sorted(sqlite_tables)
    assert pg_columns == sqlite_columns  # in column order, table by table
    assert len(pg_columns) > 50


def test_opening_a_current_embedded_database_takes_no_write_lock(tmp_path: Path) -> None:
    """Each command migrates the embedded database on open: when nothing is pending that must
    not wait for (or fail behind) another process's write transaction."""
    import sqlite3

    from umt.engine.store.sqlite import SqliteDatabase

    url = f"sqlite:///{tmp_path / 'umt.db'}"
    with Engine(open_database(url), migration_sets=[BUSINESS]) as first:
        assert first.migrate()
    writer = sqlite3.connect(tmp_path / "umt.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # a worker in the middle of a commit
        # Asking for the lock would raise "database is locked" after 0.2 s.
        database = SqliteDatabase(tmp_path / "umt.db", busy_timeout=0.2)
        with Engine(database, migration_sets=[BUSINESS]) as engine:
            assert engine.migrate() == []
            engine.require_schema()
        assert writer.in_transaction
    finally:
        writer.rollback()
        writer.close()
