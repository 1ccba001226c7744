"""The throwaway PostgreSQL of tests/support, against the real binaries."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support import postgres as pg_support
from tests.support.postgres import (
    ExternalServerError,
    PostgresCluster,
    PostgresClusterError,
)
from tests.support.skips import unavailable

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason=unavailable(
    "PostgreSQL test clusters started as root (through runuser)", "not running as root"))


def query_one(url: str, query: str) -> tuple[object, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row


def setting(url: str, name: str) -> object:
    return query_one(url, f"SHOW {name}")[0]


def process_is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that somebody else is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def own_clusters() -> Iterator[list[PostgresCluster]]:
    """Clusters a test creates itself, destroyed afterwards even if the test fails."""
    clusters: list[PostgresCluster] = []
    yield clusters
    for cluster in clusters:
        cluster.destroy()


def test_find_bindir_has_the_server_programs() -> None:
    bindir = pg_support.find_bindir()
    for program in ("initdb", "pg_ctl", "postgres"):
        assert (bindir / program).is_file()


def test_create_then_start_serves_queries_with_test_settings(
    tmp_path: Path, own_clusters: list[PostgresCluster]
) -> None:
    cluster = PostgresCluster.create(tmp_path / "pg")
    own_clusters.append(cluster)
    assert (cluster.data_dir / "PG_VERSION").is_file()
    assert not cluster.is_running()

    cluster.start()

    assert cluster.is_running()
    url = cluster.url()
    assert url == f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres"
    assert query_one(url, "SELECT 1 + 1, current_user") == (2, "postgres")
    assert setting(url, "port") == str(cluster.port)
    assert setting(url, "listen_addresses") == "127.0.0.1"
    assert setting(url, "fsync") == "off"
    assert setting(url, "synchronous_commit") == "off"
    assert setting(url, "full_page_writes") == "off"
    assert setting(url, "max_connections") == "200"
    assert setting(url, "server_encoding") == "UTF8"
    socket_dir = Path(str(setting(url, "unix_socket_directories")))
    assert (socket_dir / f".s.PGSQL.{cluster.port}").is_socket()
    assert socket_dir != Path("/var/run/postgresql")


def test_destroy_stops_the_server_and_deletes_its_files(tmp_path: Path) -> None:
    cluster = PostgresCluster.create(tmp_path / "pg")
    cluster.start()
    postmaster = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])

    cluster.destroy()
    cluster.destroy()  # a second call is harmless

    assert not process_is_alive(postmaster)
    assert not cluster.data_dir.exists()
    assert not cluster.log_file.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.url(), connect_timeout=2)


@needs_root
def test_as_root_the_server_runs_as_postgres(pg_private_cluster: PostgresCluster) -> None:
    postgres_uid = pwd.getpwnam("postgres").pw_uid
    postmaster = int((pg_private_cluster.data_dir / "postmaster.pid").read_text().split()[0])
    assert Path(f"/proc/{postmaster}").stat().st_uid == postgres_uid
    assert pg_private_cluster.data_dir.stat().st_uid == postgres_uid


@needs_root
def test_as_root_an_unreachable_base_dir_moves_to_tmp(
    tmp_path: Path, own_clusters: list[PostgresCluster]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    cluster = PostgresCluster.create(locked / "pg")
    own_clusters.append(cluster)
    home = cluster.data_dir.parent

    assert not cluster.data_dir.is_relative_to(locked)
    assert home.name.startswith("umt-pg-")
    cluster.start()
    assert query_one(cluster.url(), "SELECT 1") == (1,)

    cluster.destroy()
    assert not home.exists()


@needs_root
def test_as_root_a_reachable_base_dir_is_used_in_place(own_clusters: list[PostgresCluster]) -> None:
    base = Path(tempfile.mkdtemp(prefix="umt-pg-test-", dir="/tmp"))
    try:
        base.chmod(0o755)
        cluster = PostgresCluster.create(base / "pg")
        own_clusters.append(cluster)
        assert cluster.data_dir == base / "pg" / "data"
        cluster.start()
        assert query_one(cluster.url(), "SELECT 1") == (1,)
    finally:
        for cluster in own_clusters:
            cluster.destroy()
        shutil.rmtree(base)


def test_restart_and_stop_then_start_keep_committed_data(
    pg_private_cluster: PostgresCluster,
) -> None:
    url = pg_private_cluster.url()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (value text)")
        conn.execute("INSERT INTO kept VALUES ('before restart')")
    first_postmaster = (pg_private_cluster.data_dir / "postmaster.pid").read_text().split()[0]

    pg_private_cluster.restart()

    second_postmaster = (pg_private_cluster.data_dir / "postmaster.pid").read_text().split()[0]
    assert second_postmaster != first_postmaster
    assert query_one(url, "SELECT value FROM kept") == ("before restart",)

    with pytest.raises(PostgresClusterError, match="already running"):
        pg_private_cluster.start()

    pg_private_cluster.stop()
    assert not pg_private_cluster.is_running()
    pg_private_cluster.stop()  # stopping a stopped cluster is harmless
    with pytest.raises(PostgresClusterError, match="not running"):
        pg_private_cluster.kill()
    pg_private_cluster.start()
    assert query_one(url, "SELECT value FROM kept") == ("before restart",)


def test_kill_ends_every_server_process_and_start_recovers(
    pg_private_cluster: PostgresCluster,
) -> None:
    url = pg_private_cluster.url()
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE survivor (value text)")
        setup.execute("INSERT INTO survivor VALUES ('committed before the crash')")
    postmaster = int((pg_private_cluster.data_dir / "postmaster.pid").read_text().split()[0])
    idle = psycopg.connect(url, autocommit=True)
    backend = idle.info.backend_pid

    pg_private_cluster.kill()

    assert not pg_private_cluster.is_running()
    assert not process_is_alive(postmaster)
    assert not process_is_alive(backend)
    with pytest.raises(psycopg.OperationalError):
        idle.execute("SELECT 1")
    idle.close()

    pg_private_cluster.start()

    assert query_one(url, "SELECT value FROM survivor") == ("committed before the crash",)
    assert "not properly shut down" in pg_private_cluster.log_file.read_text()


def test_databases_are_isolated(pg_cluster: PostgresCluster) -> None:
    pg_cluster.create_database("isolation_a")
    pg_cluster.create_database("isolation_b", template="template0")
    try:
        with psycopg.connect(pg_cluster.url("isolation_a"), autocommit=True) as conn:
            conn.execute("CREATE TABLE only_in_a (id int)")
        assert query_one(pg_cluster.url("isolation_a"), "SELECT current_database()") == (
            "isolation_a",
        )
        assert query_one(
            pg_cluster.url("isolation_b"), "SELECT to_regclass('only_in_a') IS NULL"
        ) == (True,)
    finally:
        pg_cluster.drop_database("isolation_a")
        pg_cluster.drop_database("isolation_b")


def test_drop_database_disconnects_sessions_and_tolerates_absence(
    pg_cluster: PostgresCluster,
) -> None:
    pg_cluster.create_database("dropped_while_in_use")
    session = psycopg.connect(pg_cluster.url("dropped_while_in_use"), autocommit=True)
    try:
        pg_cluster.drop_database("dropped_while_in_use")
        exists = query_one(
            pg_cluster.url(),
            "SELECT count(*) FROM pg_database WHERE datname = 'dropped_while_in_use'",
        )
        assert exists == (0,)
        pg_cluster.drop_database("dropped_while_in_use")
    finally:
        session.close()


def test_pg_url_is_a_fresh_empty_database(pg_url: str, pg_cluster: PostgresCluster) -> None:
    name, tables = query_one(
        pg_url,
        "SELECT current_database(), (SELECT count(*) FROM pg_tables"
        " WHERE schemaname NOT IN ('pg_catalog', 'information_schema'))",
    )
    assert str(name).startswith("test_")
    assert tables == 0
    assert pg_url == pg_cluster.url(str(name))


def test_from_url_manages_databases_but_not_the_server(pg_cluster: PostgresCluster) -> None:
    external = PostgresCluster.from_url(pg_cluster.url())

    assert external.is_external
    assert external.port == pg_cluster.port
    assert external.is_running()
    external.create_database("made_through_url")
    try:
        assert query_one(external.url("made_through_url"), "SELECT current_database()") == (
            "made_through_url",
        )
    finally:
        external.drop_database("made_through_url")

    for operation in (external.start, external.stop, external.restart, external.kill):
        with pytest.raises(ExternalServerError):
            operation()
    with pytest.raises(NotImplementedError):
        _ = external.data_dir
    external.destroy()
    assert pg_cluster.is_running()


def test_from_url_keeps_credentials_host_and_options() -> None:
    external = PostgresCluster.from_url("postgresql://u:p%40w@db.example:6543/admin?sslmode=off")

    assert external.port == 6543
    assert external.url("my db") == "postgresql://u:p%40w@db.example:6543/my%20db?sslmode=off"
    with pytest.raises(ValueError):
        PostgresCluster.from_url("mysql://root@localhost/x")


def test_start_failure_reports_the_server_log(
    tmp_path: Path, busy_port: int, own_clusters: list[PostgresCluster]
) -> None:
    cluster = PostgresCluster.create(tmp_path / "pg", port=busy_port)
    own_clusters.append(cluster)

    with pytest.raises(PostgresClusterError) as failure:
        cluster.start()

    message = str(failure.value)
    assert "last lines of" in message
    assert "could not bind" in message
    assert not cluster.is_running()


def test_start_moves_to_another_port_when_the_chosen_one_was_taken(
    tmp_path: Path,
    busy_port: int,
    own_clusters: list[PostgresCluster],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offered = iter([busy_port])
    real_pick = pg_support.pick_free_port
    monkeypatch.setattr(pg_support, "pick_free_port", lambda: next(offered, None) or real_pick())
    cluster = PostgresCluster.create(tmp_path / "pg")
    own_clusters.append(cluster)
    assert cluster.port == busy_port

    cluster.start()

    assert cluster.port != busy_port
    assert setting(cluster.url(), "port") == str(cluster.port)


def test_pg_stat_statements_can_be_preloaded(
    tmp_path: Path, own_clusters: list[PostgresCluster]
) -> None:
    cluster = PostgresCluster.create(tmp_path / "pg", preload_pg_stat_statements=True)
    own_clusters.append(cluster)
    cluster.start()
    url = cluster.url()

    assert setting(url, "shared_preload_libraries") == "pg_stat_statements"
    assert setting(url, "pg_stat_statements.track") == "all"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("SELECT 42")
        row = conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()
    assert row is not None and row[0] > 0
