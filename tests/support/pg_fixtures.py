"""pytest fixtures for PostgreSQL; load with `pytest_plugins = ["tests.support.pg_fixtures"]`.

- `pg_cluster`: one server for the whole session (or the one named by UMT_TEST_PG_URL).
- `pg_url`: a fresh, empty database on it for one test, dropped afterwards.
- `pg_private_cluster`: a started cluster of the test's own, which it may restart or kill.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import TEST_PG_URL_ENV, PostgresCluster


def _external_url() -> str | None:
    return os.environ.get(TEST_PG_URL_ENV) or None


def _started_cluster(base_dir: Path, *, synchronous_commit: bool) -> Iterator[PostgresCluster]:
    cluster = PostgresCluster.create(base_dir, synchronous_commit=synchronous_commit)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresCluster]:
    """The session's PostgreSQL server. Tests must not stop or restart it."""
    url = _external_url()
    if url is not None:
        yield PostgresCluster.from_url(url)
        return
    yield from _started_cluster(tmp_path_factory.mktemp("pg"), synchronous_commit=False)


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster) -> Iterator[str]:
    """URL of a new empty database (cloned from template0) that only this test uses."""
    name = f"test_{uuid.uuid4().hex}"
    pg_cluster.create_database(name, template="template0")
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def pg_private_cluster(tmp_path: Path) -> Iterator[PostgresCluster]:
    """A started cluster for this test alone, to restart or kill; destroyed afterwards.

    Commits are synchronous so that a committed transaction survives `kill()`. Started from the
    local binaries even when UMT_TEST_PG_URL names the session's server (that one cannot be
    restarted from here; the test command installs the binaries).
    """
    yield from _started_cluster(tmp_path / "pg", synchronous_commit=True)
