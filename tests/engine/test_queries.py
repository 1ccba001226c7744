"""The named-query files of both dialects hold the same names (every query has a twin), except
the queries a backend lists as its own (``Database.queries_without_twin``)."""

from __future__ import annotations

from umt.engine.store.database import Database
from umt.engine.store.postgres import PostgresDatabase
from umt.engine.store.queries import QuerySet
from umt.engine.store.sqlite import SqliteDatabase

BACKENDS: list[type[Database]] = [PostgresDatabase, SqliteDatabase]


def _names(package: str, backend: type[Database]) -> frozenset[str]:
    return QuerySet.load(package, f"sql/{backend.dialect}.sql").names()


def test_every_engine_query_has_a_twin_unless_its_backend_lists_it() -> None:
    names = {backend: _names("umt.engine.store", backend) for backend in BACKENDS}
    postgres, sqlite = (names[backend] for backend in BACKENDS)
    assert (postgres - PostgresDatabase.queries_without_twin
            == sqlite - SqliteDatabase.queries_without_twin)
    for backend in BACKENDS:
        others = set().union(*(names[other] for other in BACKENDS if other is not backend))
        listed = backend.queries_without_twin
        assert listed <= names[backend], f"{backend.dialect} lists missing queries"
        assert not listed & others, f"{backend.dialect} lists queries that have a twin"


def test_only_postgresql_has_one_statement_forms() -> None:
    fast = {name for name in _names("umt.engine.store", PostgresDatabase)
            if name.endswith("_fast")}
    assert fast and fast <= PostgresDatabase.queries_without_twin
    assert not {name for name in _names("umt.engine.store", SqliteDatabase)
                if name.endswith("_fast")}


def test_the_business_queries_of_the_tests_have_twins() -> None:
    assert _names("tests.engine", PostgresDatabase) == _names("tests.engine", SqliteDatabase)
