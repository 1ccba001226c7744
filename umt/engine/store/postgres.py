"""PostgreSQL backend: a psycopg 3 connection pool, LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool

from umt.engine.clock import SYSTEM_CLOCK, ClockSample, ServerClock
from umt.engine.store.database import (
    CANCEL_CHANNEL,
    WORK_CHANNEL,
    WORKERS_CHANNEL,
    ChangeMarker,
    Database,
    Listener,
    NotificationHandler,
    Row,
    Session,
)
from umt.engine.store.driver_errors import postgres_errors
from umt.engine.store.queries import QuerySet
from umt.engine.store.urls import mask_database_url

log = logging.getLogger(__name__)


class _PostgresCodec:
    def encode(self, params: Mapping[str, object]) -> Mapping[str, object]:
        return params

    def rows(self, cursor: Any) -> list[Row]:
        # Not ``cursor.description is None``: it builds a Column per column on every call
        # (~30 us for a row of runs, on every statement); the result's status costs nothing.
        result = cursor.pgresult
        if result is None or result.status != psycopg.pq.ExecStatus.TUPLES_OK:
            return []
        rows: list[Row] = cursor.fetchall()  # dict_row: fresh dicts
        return rows


_CODEC = _PostgresCodec()


class PostgresDatabase(Database):
    dialect = "postgresql"
    notifies = True
    multi_host = True
    queries_without_twin = frozenset({
        "notify", "notify_released", "lock_migrations", "unlock_migrations",
        # Live readers (umt web); on SQLite they watch PRAGMA data_version instead.
        "change_marker",
        # The fleet's clock (fleet_clock); SQLite serves one machine and keeps its clock.
        "server_time",
    })

    def __init__(
        self,
        url: str,
        *,
        schemas: Sequence[str] = ("umt",),
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        application_name: str = "umt",
    ) -> None:
        super().__init__(QuerySet.load("umt.engine.store", "sql/postgresql.sql"))
        if not schemas:
            raise ValueError("at least one schema is needed")
        self.url = url
        self.schemas = tuple(schemas)
        self._where = mask_database_url(url)
        self._connect_timeout = connect_timeout
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout)),
            "application_name": application_name,
        }
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(pool_size, 1),
            open=False,
            timeout=connect_timeout,
            kwargs={**self._connect_kwargs, "row_factory": dict_row},
            configure=self._configure,
            name="umt",
        )
        self._opened = False
        self._open_lock = threading.Lock()
        self._clock = ServerClock(self._clock_sample)

    @property
    def engine_schema(self) -> str:
        return self.schemas[0]

    def channel(self, name: str) -> str:
        """Notification channels are per engine schema so installations sharing a server don't
        wake each other."""
        return f"{self.engine_schema}.{name}"

    def _configure(self, connection: psycopg.Connection[Any]) -> None:
        connection.adapters.register_loader("uuid", TextLoader)
        search_path = sql.SQL(", ").join(sql.Identifier(schema) for schema in self.schemas)
        connection.execute(sql.SQL("SET search_path TO {}").format(search_path))
        connection.execute("SET timezone TO 'UTC'")
        # A worker frozen inside a transaction must not block the runs it locked forever.
        connection.execute("SET idle_in_transaction_session_timeout TO '60s'")

    def _ensure_open(self) -> None:
        if not self._opened:
            with self._open_lock:
                if not self._opened:
                    self._pool.open(wait=False)
                    self._opened = True

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        self._ensure_open()
        with (
            postgres_errors(self._where),
            self._pool.connection() as connection,
            connection.transaction(),
        ):
            yield Session(connection, _CODEC, self.queries, self.dialect)

    @contextmanager
    def autocommit(self) -> Iterator[Session]:
        self._ensure_open()
        with postgres_errors(self._where), self._pool.connection() as connection:
            yield Session(connection, _CODEC, self.queries, self.dialect)

    @contextmanager
    def join(self, connection: Any) -> Iterator[Session]:
        """Runs engine queries in the caller's transaction; the caller's search_path is
        restored afterwards (``set_config(..., true)`` only lasts for that transaction)."""
        if not isinstance(connection, psycopg.Connection):
            raise TypeError("join() takes a psycopg connection")
        if connection.info.transaction_status != psycopg.pq.TransactionStatus.INTRANS:
            raise ValueError("join() needs a connection inside an open transaction")
        cursor = connection.cursor(row_factory=dict_row)
        cursor.adapters.register_loader("uuid", TextLoader)
        ours = sql.SQL(", ").join(sql.Identifier(schema) for schema in self.schemas)
        with postgres_errors(self._where):
            saved = cursor.execute("SELECT current_setting('search_path') AS path").fetchone()
            cursor.execute("SELECT set_config('search_path', %s, true)",
                           (ours.as_string(connection),))
        try:
            yield Session(cursor, _CODEC, self.queries, self.dialect)
        finally:
            with postgres_errors(self._where):
                cursor.execute("SELECT set_config('search_path', %s, true)",
                               (saved["path"] if saved else "",))

    @contextmanager
    def raw_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A dedicated connection outside the pool (migrations take a session lock on it)."""
        with postgres_errors(self._where):
            connection = psycopg.connect(self.url, row_factory=dict_row, **self._connect_kwargs)
        try:
            with postgres_errors(self._where):
                connection.execute("SET timezone TO 'UTC'")
            yield connection
        finally:
            connection.close()

    def operation(self) -> AbstractContextManager[Session]:
        # Each round trip costs a worker and a backend CPU time and, after an idle gap, most of
        # an operation's latency: one statement in autocommit instead of BEGIN, 3-6 statements
        # and COMMIT is what lets the engine keep up with two busy cores (bench/README.md).
        return self.autocommit()

    def change_marker(self, workflow_keys: Sequence[str]) -> ChangeMarker:
        with self.autocommit() as session:
            row = session.row("change_marker", workflow_keys=list(workflow_keys))
        assert row is not None
        return ChangeMarker(str(row["marker"]), bool(row["busy"]), row["next_due"])

    def fleet_clock(self) -> ServerClock:
        """The server's clock: workers on several hosts agree on it whatever their own say."""
        return self._clock

    def _clock_sample(self) -> ClockSample:
        with self.autocommit() as session:
            sent = time.monotonic()
            row = session.row("server_time")
            received = time.monotonic()
            local = SYSTEM_CLOCK.now() - timedelta(seconds=(received - sent) / 2)
        assert row is not None
        return ClockSample(row["server_time"], sent, received, local)

    def listener(self) -> Listener:
        return PostgresListener(self, [WORK_CHANNEL, CANCEL_CHANNEL, WORKERS_CHANNEL])

    def close(self) -> None:
        if self._opened:
            self._pool.close()
            self._opened = False

    def describe(self) -> str:
        return self._where


class PostgresListener(Listener):
    """LISTEN on its own autocommit connection; reconnects after the server goes away.

    Notifications only wake the worker: what is due is still decided by querying.
    """

    def __init__(self, database: PostgresDatabase, channels: Sequence[str]) -> None:
        self._database = database
        self._channels = {database.channel(name): name for name in channels}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, handler: NotificationHandler) -> None:
        self._thread = threading.Thread(
            target=self._loop, args=(handler,), name="umt-listen", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self, handler: NotificationHandler) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._listen(handler)
                backoff = 0.5
            except (psycopg.Error, OSError) as exc:
                log.warning("notification listener lost its connection (%s); retrying", exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _listen(self, handler: NotificationHandler) -> None:
        with psycopg.connect(self._database.url, **self._database._connect_kwargs) as connection:
            for channel in self._channels:
                connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            # Anything may have happened while we were not listening.
            handler("listening", "")
            while not self._stop.is_set():
                for notification in connection.notifies(timeout=0.5):
                    handler(self._channels.get(notification.channel, ""), notification.payload)
