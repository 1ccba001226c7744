"""SQLite backend: one file, WAL, BEGIN IMMEDIATE, a cheap data_version poll for wake-ups.

Limits, refused rather than faked: workers must run on the host that owns the file (SQLite
locking is not safe over network filesystems) and there are no notifications; waiting workers
notice commits of other processes by polling ``PRAGMA data_version``, which reads only the
shared-memory WAL index.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from umt.engine.errors import StoreCorrupt, StoreReadOnly, StoreUnavailable
from umt.engine.store.database import (
    LIVENESS_CHECK,
    ChangeMarker,
    Database,
    Listener,
    NotificationHandler,
    Row,
    Session,
)
from umt.engine.store.driver_errors import sqlite_errors
from umt.engine.store.queries import QuerySet


def _decode_time(raw: bytes) -> datetime:
    return datetime.fromisoformat(raw.decode())


sqlite3.register_converter("TIMETEXT", _decode_time)
sqlite3.register_converter("JSONTEXT", json.loads)
sqlite3.register_converter("BOOLINT", lambda raw: raw not in (b"0", b""))


def encode_time(moment: datetime) -> str:
    """Fixed-width UTC text, so that text order is time order."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime given to the database")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


class _SqliteCodec:
    def encode(self, params: Mapping[str, object]) -> Mapping[str, object]:
        return {key: _encode_value(value) for key, value in params.items()}

    def rows(self, cursor: Any) -> list[Row]:
        if cursor.description is None:
            return []
        rows: list[Row] = cursor.fetchall()  # _dict_factory: fresh dicts
        return rows


def _encode_value(value: object) -> object:
    if isinstance(value, datetime):
        return encode_time(value)
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    return value


_CODEC = _SqliteCodec()


def _dict_factory(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


class SqliteDatabase(Database):
    dialect = "sqlite"
    notifies = False
    multi_host = False
    queries_without_twin = frozenset({"live_workers_elsewhere"})

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 30.0,
        poll_interval: float = 0.2,
        create: bool = True,
    ) -> None:
        super().__init__(QuerySet.load("umt.engine.store", "sql/sqlite.sql"))
        self.path = path
        self.poll_interval = poll_interval
        self._busy_timeout = busy_timeout
        self._create = create
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._where = str(path)

    def _preflight(self) -> None:
        """Refuse clearly, before SQLite writes anything, what cannot work."""
        if self.path.exists():
            if not self.path.is_file():
                raise StoreCorrupt(f"{self.path} is not a file")
            if not os.access(self.path, os.R_OK):
                raise StoreUnavailable(f"cannot read the SQLite database {self.path}")
            if not os.access(self.path, os.W_OK) or not os.access(self.path.parent, os.W_OK):
                raise StoreReadOnly(
                    f"the SQLite database {self.path} (or its folder, which must hold the "
                    "-wal and -shm files) is not writable"
                )
            if not _holds_connections(self.path):
                _check_header(self.path)
            return
        if not self._create:
            raise StoreUnavailable(f"no SQLite database at {self.path}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreReadOnly(f"cannot create the folder of {self.path}: {exc}") from exc
        if not os.access(self.path.parent, os.W_OK):
            raise StoreReadOnly(f"cannot create {self.path}: its folder is not writable")

    def _connect(self) -> sqlite3.Connection:
        self._preflight()
        with sqlite_errors(self._where):
            connection = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
                check_same_thread=False,
            )
            connection.row_factory = _dict_factory
            try:
                connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
                connection.execute("PRAGMA journal_mode=WAL").fetchall()
                connection.execute("PRAGMA synchronous=FULL")
                connection.execute("PRAGMA foreign_keys=ON")
            except BaseException:
                connection.close()
                raise
        with self._connections_lock:
            self._connections.append(connection)
        _count_connections(self.path, +1)
        return connection

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
        return connection

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        connection = self._connection()
        with sqlite_errors(self._where):
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield Session(connection, _CODEC, self.queries, self.dialect)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextmanager
    def autocommit(self) -> Iterator[Session]:
        connection = self._connection()
        with sqlite_errors(self._where):
            yield Session(connection, _CODEC, self.queries, self.dialect)

    def join(self, connection: Any) -> AbstractContextManager[Session]:
        raise NotImplementedError(
            "joining a caller's transaction is supported on PostgreSQL only; on SQLite use "
            "the engine's own transaction"
        )

    def operation(self) -> AbstractContextManager[Session]:
        return self.transaction()

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file."""
        with sqlite_errors(self._where):
            row = self._connection().execute("PRAGMA data_version").fetchone()
        return int(row["data_version"])

    def change_marker(self, workflow_keys: Sequence[str]) -> ChangeMarker:
        return ChangeMarker(str(self.data_version()), False, None)

    def listener(self, check_every: float = LIVENESS_CHECK) -> Listener:
        # Its loop reads the file's data version: every wake-up check is a round trip already.
        return DataVersionListener(self)

    def close(self) -> None:
        with self._connections_lock:
            for connection in self._connections:
                connection.close()
            _count_connections(self.path, -len(self._connections))
            self._connections.clear()
        self._local = threading.local()

    def describe(self) -> str:
        return self._where


_SQLITE_MAGIC = b"SQLite format 3\x00"

#: Connections this process holds per database file. While there are any, the file must not
#: be opened with ``open()``: its ``close()`` drops every POSIX lock SQLite holds on the file
#: for the whole process, and another process closing its last connection would then delete
#: the WAL under ours (SQLite's "How To Corrupt An SQLite Database File", 2.2).
_open_connections: dict[str, int] = {}
_open_connections_lock = threading.Lock()


def _count_connections(path: Path, change: int) -> None:
    key = os.path.realpath(path)
    with _open_connections_lock:
        count = _open_connections.get(key, 0) + change
        if count > 0:
            _open_connections[key] = count
        else:
            _open_connections.pop(key, None)


def _holds_connections(path: Path) -> bool:
    with _open_connections_lock:
        return os.path.realpath(path) in _open_connections


def _check_header(path: Path) -> None:
    with path.open("rb") as handle:
        header = handle.read(len(_SQLITE_MAGIC))
    if header and header != _SQLITE_MAGIC:
        raise StoreCorrupt(f"{path} is not an SQLite database (bad header); nothing was changed")


class DataVersionListener(Listener):
    """Polls ``PRAGMA data_version`` on its own connection; calls the handler on every change."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, handler: NotificationHandler) -> None:
        self._thread = threading.Thread(
            target=self._loop, args=(handler, self._database.data_version),
            name="umt-data-version", daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self, handler: NotificationHandler, read_version: Callable[[], int]) -> None:
        last: int | None = None
        while True:
            version: int | None
            try:
                version = read_version()
            except StoreUnavailable:
                version = last
            if version != last:
                # Also on the first reading: what was committed before it (since the worker
                # started) is not seen as a change later, so wake the worker to look now.
                handler("changed", "")
                last = version
            if self._stop.wait(self._database.poll_interval):
                return
