"""Network partitions (PostgreSQL): connections notice a dead peer, the listener proves it is
alive and reconnects, a worker cut off from the database fences itself."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.engine.conftest import wait_until
from umt.engine import open_database
from umt.engine.store.postgres import PostgresDatabase
from umt.engine.store.tcp_liveness import liveness_parameters

pytestmark = pytest.mark.postgres_only

LIVENESS = ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
            "tcp_user_timeout")


def _in_effect(connection: psycopg.Connection[Any]) -> dict[str, str]:
    parameters = connection.info.get_parameters()
    return {name: parameters.get(name, "") for name in LIVENESS}


def _postgres(url: str, lease: timedelta) -> PostgresDatabase:
    database = open_database(url, lease=lease)
    assert isinstance(database, PostgresDatabase)
    return database


def test_liveness_parameters_follow_the_lease() -> None:
    short = liveness_parameters(timedelta(seconds=30))
    assert short["keepalives"] == "1"
    assert int(short["tcp_user_timeout"]) == 10_000  # a third of the lease
    detection = (int(short["keepalives_idle"])
                 + int(short["keepalives_interval"]) * int(short["keepalives_count"]))
    assert detection <= 10
    longer = liveness_parameters(timedelta(minutes=3))
    assert int(longer["keepalives_idle"]) > int(short["keepalives_idle"])
    tiny = liveness_parameters(timedelta(seconds=1))
    assert int(tiny["tcp_user_timeout"]) >= 5_000  # not so short that a busy network fails


def test_pool_raw_and_listener_connections_carry_keepalives(backend: str, pg_url: str) -> None:
    lease = timedelta(seconds=30)
    expected = liveness_parameters(lease)
    database = _postgres(pg_url, lease)
    opened: list[dict[str, str]] = []
    connect = database.connect

    def recording_connect(**options: Any) -> psycopg.Connection[Any]:
        connection = connect(**options)
        opened.append(_in_effect(connection))
        return connection

    database.connect = recording_connect  # type: ignore[method-assign]
    try:
        with database.autocommit() as session:
            session.execute_text("SELECT 1")
            pooled = session._connection
            assert isinstance(pooled, psycopg.Connection)
            assert _in_effect(pooled) == expected
        with database.raw_connection() as raw:
            assert _in_effect(raw) == expected
        listener = database.listener()
        listening: list[str] = []
        listener.start(lambda channel, _payload: listening.append(channel))
        try:
            wait_until(lambda: "listening" in listening)
        finally:
            listener.stop()
        assert len(opened) == 2  # raw, then the listener's
        assert opened[1] == expected
    finally:
        database.close()


def test_a_setting_in_the_url_wins(backend: str, pg_url: str) -> None:
    separator = "&" if "?" in pg_url else "?"
    database = _postgres(f"{pg_url}{separator}keepalives_idle=42&tcp_user_timeout=1234",
                         timedelta(seconds=30))
    try:
        with database.raw_connection() as raw:
            in_effect = _in_effect(raw)
        with database.autocommit() as session:
            pooled = session._connection
            assert isinstance(pooled, psycopg.Connection)
            assert _in_effect(pooled) == in_effect
    finally:
        database.close()
    assert in_effect["keepalives_idle"] == "42"
    assert in_effect["tcp_user_timeout"] == "1234"
    assert in_effect["keepalives_count"] == liveness_parameters(timedelta(seconds=30))[
        "keepalives_count"]
