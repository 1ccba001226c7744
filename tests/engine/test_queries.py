"""The named-query files of both dialects hold the same names (every query has a twin), except
the queries a backend lists as its own (``Database.queries_without_twin``)."""

from __future__ import annotations

from importlib import resources

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


HOT_OPERATIONS = frozenset({
    "insert_run", "claim_runs", "begin_step", "complete_step", "finish_parked_step",
    "start_sleep", "park_again", "complete_run", "send_signal", "report_progress", "fail_step",
    "fail_run", "finish_compensation", "hand_back", "wait_for_signal",
})


def test_every_hot_operation_is_one_query_with_the_same_name_in_each_dialect() -> None:
    for backend in BACKENDS:
        names = _names("umt.engine.store", backend)
        assert names >= HOT_OPERATIONS, backend.dialect
        assert not {name for name in names if name.endswith("_fast")}, backend.dialect


def test_the_fence_is_written_once_per_dialect() -> None:
    package = "umt.engine.store"
    for backend, epoch in [(PostgresDatabase, "%(lease_epoch)s"), (SqliteDatabase, ":lease_epoch")]:
        text = (resources.files(package) / f"sql/{backend.dialect}.sql").read_text()
        assert text.count(f"lease_epoch = {epoch}") == 1, backend.dialect
        queries = QuerySet.load(package, f"sql/{backend.dialect}.sql")
        for name in ("begin_step", "complete_step", "finish_parked_step", "start_sleep",
                     "park_again", "complete_run", "report_progress", "lock_fence", "fail_step",
                     "fail_run", "finish_compensation", "hand_back", "wait_for_signal"):
            assert f"lease_epoch = {epoch}" in queries[name].sql, (backend.dialect, name)


def test_included_blocks_are_expanded_and_split_into_statements() -> None:
    queries = QuerySet.from_text(
        "-- name: cond\n-- a comment\nx = :x\n\n"
        "-- name: two\nUPDATE t SET a = 1 WHERE {cond};\n-- a comment;\nSELECT * FROM t\n"
        "WHERE {cond};\n",
        "test",
    )
    assert queries["two"].statements == (
        "UPDATE t SET a = 1 WHERE x = :x", "-- a comment;\nSELECT * FROM t\nWHERE x = :x"
    )


def test_the_business_queries_of_the_tests_have_twins() -> None:
    assert _names("tests.engine", PostgresDatabase) == _names("tests.engine", SqliteDatabase)
