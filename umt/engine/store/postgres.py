"""PostgreSQL backend: a psycopg 3 connection pool, LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
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

from umt.engine.clock import SYSTEM_CLOCK, ClockSample, ServerClock, elapsed
from umt.engine.store.database import (
    CANCEL_CHANNEL,
    LIVENESS_CHECK,
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
from umt.engine.store.tcp_liveness import liveness_parameters, not_in_url
from umt.engine.store.urls import mask_database_url

log = logging.getLogger(__name__)

#: The shortest wait for the listener's round trip: a loaded host may be slow to answer.
ROUND_TRIP_DEADLINE = 2.0
#: The lease the TCP liveness settings are derived from when the caller names none.
DEFAULT_LEASE = timedelta(seconds=30)


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


class _PostgresSession(Session):
    def _execute_statements(
        self, statements: Sequence[str], encoded: Mapping[str, object]
    ) -> list[Row]:
        connection = self._connection
        if not isinstance(connection, psycopg.Connection):  # a joined caller's cursor
            return super()._execute_statements(statements, encoded)
        # One pipeline and one Sync: the statements travel in one round trip and, outside a
        # transaction, run as one implicit transaction (committed at the Sync, all or
        # nothing). Each still takes its own snapshot: it sees what committed while an
        # earlier statement waited for a lock.
        with connection.pipeline():
            cursors = [connection.execute(statement, encoded) for statement in statements]
        result: list[Row] = []
        for cursor in cursors:
            self.rowcount = cursor.rowcount
            pgresult = cursor.pgresult
            if pgresult is not None and pgresult.status == psycopg.pq.ExecStatus.TUPLES_OK:
                result = self._codec.rows(cursor)
        return result


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
        # A claim of the runs notifications named (only notifications name runs), and the
        # blocks it shares with claim_runs; SQLite's claim_runs is written differently.
        "claim_notified_runs", "claimable", "lease_due",
    })

    def __init__(
        self,
        url: str,
        *,
        schemas: Sequence[str] = ("umt",),
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        application_name: str = "umt",
        lease: timedelta = DEFAULT_LEASE,
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
            **not_in_url(url, liveness_parameters(lease)),
        }
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(pool_size, 1),
            open=False,
            timeout=connect_timeout,
            # The pool's own retries back off without bound; giving up soon lets the next
            # request start afresh, so that a worker is back soon after a partition heals.
            reconnect_timeout=max(2 * connect_timeout, 10.0),
            kwargs={**self._connect_kwargs, "row_factory": dict_row},
            configure=self._configure,
            name="umt",
        )
        self._opened = False
        self._open_lock = threading.Lock()
        #: Connections lent out now, with when (time.monotonic()) they were lent.
        self._lent: dict[int, tuple[psycopg.Connection[Any], float]] = {}
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
    def _borrowed(self) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection() as connection:
            key = id(connection)
            self._lent[key] = (connection, time.monotonic())
            try:
                yield connection
            finally:
                self._lent.pop(key, None)

    def abort_stuck(self, older_than: float) -> int:
        """Fails the statements of connections lent out for ``older_than`` seconds or more (the
        pool replaces them): when a worker gives its runs up because its heartbeat has not
        been answered, statements waiting on a cut path must not wait on for minutes."""
        now = time.monotonic()
        stuck = [connection for connection, since in self._lent.copy().values()
                 if now - since >= older_than]
        for connection in stuck:
            with contextlib.suppress(psycopg.Error), _socket_of(connection) as duplicate:
                _shut_down(duplicate)
        return len(stuck)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        self._ensure_open()
        with (
            postgres_errors(self._where),
            self._borrowed() as connection,
            connection.transaction(),
        ):
            yield _PostgresSession(connection, _CODEC, self.queries, self.dialect)

    @contextmanager
    def autocommit(self) -> Iterator[Session]:
        self._ensure_open()
        with postgres_errors(self._where), self._borrowed() as connection:
            yield _PostgresSession(connection, _CODEC, self.queries, self.dialect)

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
            yield _PostgresSession(cursor, _CODEC, self.queries, self.dialect)
        finally:
            with postgres_errors(self._where):
                cursor.execute("SELECT set_config('search_path', %s, true)",
                               (saved["path"] if saved else "",))

    @contextmanager
    def raw_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A dedicated connection outside the pool (migrations take a session lock on it)."""
        with postgres_errors(self._where):
            connection = self.connect(row_factory=dict_row)
        try:
            with postgres_errors(self._where):
                connection.execute("SET timezone TO 'UTC'")
            yield connection
        finally:
            connection.close()

    def connect(self, **options: Any) -> psycopg.Connection[Any]:
        """A connection of its own (not pooled), with the pool's settings."""
        return psycopg.connect(self.url, **self._connect_kwargs, **options)

    def operation(self) -> AbstractContextManager[Session]:
        # Each round trip costs a worker and a backend CPU time and, after an idle gap, most of
        # an operation's latency: one statement in autocommit instead of BEGIN, 3-6 statements
        # and COMMIT is what lets the engine keep up with two busy cores (bench/README.md). A
        # query of a few statements (a lock, then the statement that must see what committed
        # while it waited) is pipelined: one round trip, one implicit transaction.
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
            sent = elapsed()
            row = session.row("server_time")
            received = elapsed()
            local = SYSTEM_CLOCK.now() - timedelta(seconds=(received - sent) / 2)
        assert row is not None
        return ClockSample(row["server_time"], sent, received, local)

    def listener(self, check_every: float = LIVENESS_CHECK) -> Listener:
        return PostgresListener(
            self, [WORK_CHANNEL, CANCEL_CHANNEL, WORKERS_CHANNEL], check_every=check_every
        )

    def close(self) -> None:
        if self._opened:
            self._pool.close()
            self._opened = False

    def describe(self) -> str:
        return self._where


class PostgresListener(Listener):
    """LISTEN on its own autocommit connection; reconnects when the connection fails.

    A LISTEN connection never writes, so it would not notice that the server side is gone (a
    failover, a NAT or proxy timeout, a server killing idle sessions): it round-trips every
    ``check_every`` seconds, and a round trip that fails or takes longer than half of that (2 s
    at least) counts as a lost connection. Every (re)connection is announced to the handler as
    ``listening``, since anything may have happened meanwhile. Notifications only wake the
    worker: what is due is still decided by querying.
    """

    def __init__(
        self, database: PostgresDatabase, channels: Sequence[str], *,
        check_every: float = LIVENESS_CHECK,
    ) -> None:
        self._database = database
        self._channels = {database.channel(name): name for name in channels}
        self._check_every = max(check_every, 0.5)
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
        lost = False
        while not self._stop.is_set():
            try:
                self._listen(handler, reconnected=lost)
                backoff = 0.5
            except (psycopg.Error, OSError) as exc:
                log.warning("notification listener: connection lost (%s); reconnecting",
                            str(exc).strip() or type(exc).__name__)
                lost = True
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _listen(self, handler: NotificationHandler, *, reconnected: bool) -> None:
        with self._database.connect() as connection:
            for channel in self._channels:
                connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            if reconnected:
                log.warning("notification listener: reconnected, listening again")
            # Anything may have happened while we were not listening.
            handler("listening", "")
            next_check = time.monotonic() + self._check_every
            while not self._stop.is_set():
                wait = min(0.5, max(0.0, next_check - time.monotonic()))
                for notification in connection.notifies(timeout=wait):
                    handler(self._channels.get(notification.channel, ""), notification.payload)
                if time.monotonic() >= next_check:
                    _round_trip(connection,
                                deadline=max(self._check_every / 2, ROUND_TRIP_DEADLINE))
                    next_check = time.monotonic() + self._check_every


def _round_trip(connection: psycopg.Connection[Any], *, deadline: float) -> None:
    """``SELECT 1``, given up after ``deadline`` seconds: a server side that is gone behind a
    proxy never answers, and TCP cannot tell (the proxy acknowledges every byte)."""
    with _socket_of(connection) as duplicate:
        alarm = threading.Timer(deadline, _shut_down, args=(duplicate,))
        alarm.daemon = True
        alarm.start()
        try:
            connection.execute("SELECT 1")
        finally:
            alarm.cancel()
            alarm.join()


def _socket_of(connection: psycopg.Connection[Any]) -> socket.socket:
    """The connection's socket, on a descriptor of our own (psycopg owns the original one,
    whose number may be reused once psycopg closes it)."""
    return socket.socket(fileno=os.dup(connection.fileno()))


def _shut_down(duplicate: socket.socket) -> None:
    # Shutting the socket down (not closing a descriptor) makes a blocked read on it return at
    # once, and psycopg report the connection as lost.
    with contextlib.suppress(OSError):
        duplicate.shutdown(socket.SHUT_RDWR)
