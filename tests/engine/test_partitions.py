"""Network partitions (PostgreSQL): connections notice a dead peer, the listener proves it is
alive and reconnects, a worker cut off from the database fences itself."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.engine.conftest import WorkerThread, stop_workers, wait_for_status, wait_until
from tests.support.tcp_proxy import TcpProxy
from umt.engine import (
    Engine,
    RunStatus,
    StepContext,
    WorkerOptions,
    Workflow,
    open_database,
)
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


def _receive(ctx: Any, signal_name: str) -> Any:
    received = ctx.wait_for_signal("wait", signal_name)
    return None if received is None else received.data


RECEIVER = Workflow("partition-receiver", "1", _receive)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[TcpProxy]:
    parts = urlsplit(pg_url)
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as running:
        yield running


def _direct_and_through(
    proxy: TcpProxy, pg_url: str, options: WorkerOptions
) -> tuple[Engine, Engine]:
    """A migrated engine on the database, and one reaching it through ``proxy``."""
    direct = Engine(open_database(pg_url))
    direct.migrate()
    return direct, Engine(open_database(proxy.url_for(pg_url), lease=options.lease))


def test_a_listener_whose_server_side_is_lost_reconnects_and_wakes_the_worker(
    backend: str, pg_url: str, proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    options = WorkerOptions(concurrency=1, lease=timedelta(seconds=12),
                            poll_interval=timedelta(seconds=60))
    direct, cut_off = _direct_and_through(proxy, pg_url, options)
    worker = WorkerThread(cut_off.worker([RECEIVER], options))
    try:
        during = direct.start(RECEIVER, "during").run.id
        after = direct.start(RECEIVER, "after").run.id
        worker.start()
        for run_id in (during, after):
            wait_for_status(direct, run_id, RunStatus.WAITING)
        wait_until(lambda: proxy.lose_server_side(b'LISTEN "'), message="a LISTEN connection")
        lost_at = time.monotonic()
        direct.signal("during", "in the gap")  # its notification goes to the lost connection

        def logged(text: str) -> bool:
            return any(text in record.getMessage() for record in caplog.records)

        wait_until(lambda: logged("notification listener: connection lost"), timeout=15)
        wait_until(lambda: logged("notification listener: reconnected"), timeout=15)
        # The last poll began when the worker went idle, before the loss: within 60 s only
        # the claim pass after the reconnection, then the new LISTEN connection, can wake it.
        assert wait_for_status(direct, during, RunStatus.SUCCEEDED, timeout=20).output == (
            "in the gap")
        time.sleep(max(0.0, lost_at + 10 - time.monotonic()))
        direct.signal("after", "after the gap")
        assert wait_for_status(direct, after, RunStatus.SUCCEEDED, timeout=20).output == (
            "after the gap")
    finally:
        stop_workers([worker])
        cut_off.close()
        direct.close()


def test_a_worker_cut_off_from_the_database_stops_its_step_before_another_takes_over(
    backend: str, pg_url: str, proxy: TcpProxy, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    partial = tmp_path / "movie.mkv.umt-partial"
    cut = threading.Event()
    a_stopped = threading.Event()
    entered: list[str] = []
    seen_by_b: list[tuple[bool, bool]] = []

    def copy(step: StepContext) -> str:
        if cut.is_set():  # worker B, after the partition began
            seen_by_b.append((a_stopped.is_set(), partial.exists()))
            entered.append("B")
            return "copied by B"
        entered.append("A")
        try:
            partial.write_bytes(b"")
            done = 0
            while True:  # a copy that reports progress and checks between chunks
                with partial.open("ab") as out:
                    out.write(b"x" * 1024)
                done += 1
                step.progress(done, None)
                step.sleep(0.05)
        except BaseException:
            partial.unlink(missing_ok=True)  # as the importer does with its partial file
            raise
        finally:
            a_stopped.set()

    workflow = Workflow("partition-copy", "1", lambda ctx, _: ctx.step("copy", copy))
    options = WorkerOptions(concurrency=1, lease=timedelta(seconds=4),
                            poll_interval=timedelta(seconds=0.5))
    direct, cut_off = _direct_and_through(proxy, pg_url, options)
    worker_a = WorkerThread(cut_off.worker([workflow], options)).start()
    workers = [worker_a]
    try:
        run_id = direct.start(workflow).run.id
        wait_until(lambda: partial.exists() and partial.stat().st_size > 4096,
                   message="A copying")
        proxy.cut()
        cut.set()
        workers.append(WorkerThread(direct.worker([workflow], options)).start())
        done = wait_for_status(direct, run_id, RunStatus.SUCCEEDED, timeout=40)
        healed_at = time.time()
        proxy.heal()
        wait_until(lambda: any("database reachable again" in record.getMessage()
                               for record in caplog.records), timeout=20)
    finally:
        proxy.heal()
        stop_workers(workers)
        cut_off.close()
        direct.close()
    assert done.output == "copied by B"
    assert entered == ["A", "B"]
    assert seen_by_b == [(True, False)], "A's step had stopped and removed its partial file"
    messages = [record.getMessage() for record in caplog.records]
    assert any("lease presumed lost" in message for message in messages)
    [back] = [record for record in caplog.records
              if "database reachable again" in record.getMessage()]
    assert back.created >= healed_at, "A noticed the database once it answered, not before"
