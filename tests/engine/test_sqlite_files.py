"""SQLite files umt cannot use: a clear error, and the file's bytes unchanged."""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import as_nobody, reachable_folder
from umt.engine import (
    Engine,
    SchemaTooNew,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    Workflow,
    open_database,
)

NOOP = Workflow("noop", "1", lambda ctx, _: None)


def _digest(folder: Path) -> dict[str, str]:
    """Every file in the folder and a hash of its bytes."""
    return {
        entry.name: hashlib.sha256(entry.read_bytes()).hexdigest()
        for entry in sorted(folder.iterdir())
        if entry.is_file()
    }


def _use(path: Path, *, schema_only: bool = False) -> list[tuple[str, str]]:
    """What happens when umt uses the file: the error of each operation, or "ok".

    ``schema_only``: only what checks the schema version (migrate, require_schema); the other
    operations trust the caller to have checked it.
    """
    outcomes = []
    engine = Engine(open_database(f"sqlite:///{path}"))
    operations: list[Callable[[], object]] = [engine.migrate, engine.require_schema]
    if not schema_only:
        operations += [engine.list_runs, lambda: engine.start(NOOP)]
    try:
        for operation in operations:
            try:
                operation()
                outcomes.append(("ok", ""))
            except StoreError as exc:
                outcomes.append((type(exc).__name__, str(exc)))
    finally:
        engine.close()
    return outcomes


def _use_as_nobody(path: Path) -> list[tuple[str, str]]:
    """``_use`` without root's power to write anywhere (root ignores file modes)."""
    return [(name, message) for name, message in as_nobody(lambda: _use(path))]


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder the unprivileged user can reach (pytest's tmp_path is root's alone)."""
    with reachable_folder("umt-sqlite-") as path:
        yield path


def _migrated(path: Path) -> None:
    with Engine(open_database(f"sqlite:///{path}")) as engine:
        engine.migrate()
        engine.start(NOOP, "existing")
    assert not Path(f"{path}-wal").exists(), "closing should have checkpointed the WAL"


def test_a_database_on_a_read_only_path_is_refused_untouched(folder: Path) -> None:
    path = folder / "umt.db"
    _migrated(path)
    path.chmod(0o444)
    folder.chmod(0o555)
    before = _digest(folder)

    outcomes = _use_as_nobody(path)

    assert {name for name, _ in outcomes} == {StoreReadOnly.__name__}, outcomes
    assert all(str(path) in message for _, message in outcomes)
    assert _digest(folder) == before


def test_a_database_in_a_read_only_folder_is_refused(folder: Path) -> None:
    path = folder / "umt.db"
    _migrated(path)
    path.chmod(0o666)  # the file is writable, but its -wal and -shm cannot be created
    folder.chmod(0o555)
    before = _digest(folder)

    outcomes = _use_as_nobody(path)

    assert {name for name, _ in outcomes} == {StoreReadOnly.__name__}, outcomes
    assert "not writable" in outcomes[0][1]
    assert _digest(folder) == before


def test_a_new_database_in_a_read_only_folder_is_refused(folder: Path) -> None:
    folder.chmod(0o555)
    outcomes = _use_as_nobody(folder / "new.db")
    assert {name for name, _ in outcomes} == {StoreReadOnly.__name__}, outcomes
    assert _digest(folder) == {}


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"this is a text file, not a database\n" * 100, id="text"),
        pytest.param(b"SQLite format 3\x00" + bytes(range(256)) * 16, id="bad-pages"),
    ],
)
def test_a_corrupt_file_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "umt.db"
    path.write_bytes(content)
    outcomes = _use(path)
    assert {name for name, _ in outcomes} == {StoreCorrupt.__name__}, outcomes
    assert all(str(path) in message for _, message in outcomes)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["umt.db"]


def test_a_truncated_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "umt.db"
    _migrated(path)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    before = _digest(tmp_path)

    outcomes = _use(path)

    assert {name for name, _ in outcomes} == {StoreCorrupt.__name__}, outcomes
    assert _digest(tmp_path) == before


def test_a_file_migrated_by_a_newer_umt_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "umt.db"
    _migrated(path)
    newer = Engine(open_database(f"sqlite:///{path}"))
    with newer, newer.database.transaction() as session:
        session.rows("record_migration", component="engine", version=999,
                     name="from_the_future", checksum="x", now=newer.clock.now())
    before = _digest(tmp_path)

    outcomes = _use(path, schema_only=True)

    assert [name for name, _ in outcomes] == [SchemaTooNew.__name__] * 2
    assert "newer" in outcomes[0][1] and "upgrade umt" in outcomes[0][1]
    assert _digest(tmp_path) == before


def test_the_file_is_created_with_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "umt.db"
    with Engine(open_database(f"sqlite:///{path}")) as engine:
        engine.migrate()
        engine.require_schema()
    assert path.is_file()
    assert stat.S_ISREG(path.stat().st_mode)
