"""What the engine needs from a database, and the session that runs named queries.

``Database`` is implemented once per backend (``postgres.py``, ``sqlite.py``); the engine's
operations (``runs.py``, ``steps.py``, …) are written once against it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from umt.engine.clock import SYSTEM_CLOCK, Clock
from umt.engine.store.queries import Query, QuerySet

Row = dict[str, Any]

#: Notification channels: something became due / a run was canceled (payload: its id) / a
#: worker registered (payload: its host key).
WORK_CHANNEL = "work"
CANCEL_CHANNEL = "cancel"
WORKERS_CHANNEL = "workers"
NotificationHandler = Callable[[str, str], None]
#: A work notification's payload names a workflow key (something of it may be due: every worker
#: of it looks) or, for a single run due now, ``run <id> <workflow key>`` (one worker claims it).
_DUE_RUN = "run "


def due_run_payload(run_id: str, workflow_key: str) -> str:
    return f"{_DUE_RUN}{run_id} {workflow_key}"


def due_run(payload: str) -> tuple[str, str] | None:
    """The run id and workflow key of a payload of ``due_run_payload``, else None."""
    if not payload.startswith(_DUE_RUN):
        return None
    run_id, _, workflow_key = payload.removeprefix(_DUE_RUN).partition(" ")
    return (run_id, workflow_key) if workflow_key else None
#: How often (seconds) a listener's connection round-trips to prove the server still hears it.
LIVENESS_CHECK = 5.0


@dataclass(frozen=True)
class ChangeMarker:
    """What a live reader watches besides notifications (see ``Database.change_marker``)."""

    marker: str
    busy: bool
    next_due: datetime | None


class Codec(Protocol):
    """Converts between Python values and what one driver stores."""

    def encode(self, params: Mapping[str, object]) -> Mapping[str, object]: ...

    def rows(self, cursor: Any) -> list[Row]:
        """The rows of the statement the cursor just ran ([] if it returns none), decoded."""


class RawConnection(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


class Session:
    """A connection borrowed for one transaction (or one autocommit statement batch)."""

    def __init__(
        self, connection: RawConnection, codec: Codec, queries: QuerySet, dialect: str
    ) -> None:
        self._connection = connection
        self._codec = codec
        self._queries = queries
        self.dialect = dialect
        self.rowcount = 0

    def execute(self, query: Query, params: Mapping[str, object] | None = None) -> list[Row]:
        """Run a named query (from any query set) and return its rows, decoded. A query of
        several statements runs them in order and returns the rows of the last one that has
        result columns."""
        encoded = self._codec.encode(params or {})
        if len(query.statements) == 1:
            cursor = self._connection.execute(query.sql, encoded)
            self.rowcount = cursor.rowcount
            return self._codec.rows(cursor)
        return self._execute_statements(query.statements, encoded)

    def _execute_statements(
        self, statements: Sequence[str], encoded: Mapping[str, object]
    ) -> list[Row]:
        """The statements of one query, in order; the rows of the last one with columns."""
        result: list[Row] = []
        for statement in statements:
            cursor = self._connection.execute(statement, encoded)
            self.rowcount = cursor.rowcount
            rows = self._codec.rows(cursor)  # read to the end: a RETURNING statement's last row
            if cursor.description is not None:
                result = rows
        return result

    def execute_text(self, statement: str) -> None:
        """Run one statement of a trusted migration file (no parameters)."""
        self._connection.execute(statement)

    def rows(self, query_name: str, /, **params: object) -> list[Row]:
        return self.execute(self._queries[query_name], params)

    def row(self, query_name: str, /, **params: object) -> Row | None:
        found = self.rows(query_name, **params)
        return found[0] if found else None

    def count(self, query_name: str, /, **params: object) -> int:
        """Run a statement and return how many rows it changed."""
        self.rows(query_name, **params)
        return self.rowcount


class Listener(ABC):
    """Wakes a worker when something may have become due (see the backends for how)."""

    @abstractmethod
    def start(self, handler: NotificationHandler) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class Database(ABC):
    dialect: ClassVar[str]
    #: Whether sessions can wake other processes (LISTEN/NOTIFY).
    notifies: ClassVar[bool]
    #: Whether workers on several hosts may share this database.
    multi_host: ClassVar[bool]
    #: Queries of this backend's file that the other backend's file does not have (every other
    #: query has a twin of the same name there; tests/engine/test_queries.py checks it).
    queries_without_twin: ClassVar[frozenset[str]]

    def __init__(self, queries: QuerySet) -> None:
        self.queries = queries
        self._query_sets: dict[str, QuerySet] = {}
        self._query_sets_lock = threading.Lock()

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Session]:
        """A read-write transaction; commits on success, rolls back on any exception."""

    @abstractmethod
    def autocommit(self) -> AbstractContextManager[Session]:
        """A session whose statements commit one by one (reads, single writes)."""

    @abstractmethod
    def join(self, connection: Any) -> AbstractContextManager[Session]:
        """A session on a caller's connection, inside the caller's open transaction."""

    @abstractmethod
    def operation(self) -> AbstractContextManager[Session]:
        """A session for one store operation, which is one named query: one statement on
        PostgreSQL (run in autocommit: one round trip, one commit; a query of a few statements
        is pipelined as one implicit transaction, still one round trip), a few on SQLite (run
        in one transaction: in-process, statements cost no round trips)."""

    @abstractmethod
    def change_marker(self, workflow_keys: Sequence[str]) -> ChangeMarker:
        """For readers that show live state: a value that changes whenever a writing
        transaction begins or ends (or, on SQLite, commits), whether a step is executing now,
        and when the next run of ``workflow_keys`` falls due (PostgreSQL only: LISTEN/NOTIFY
        misses what needs no worker woken, e.g. a finished step, copy progress or a claim; on
        SQLite every commit changes the marker, and the other two are False and None)."""

    @abstractmethod
    def listener(self, check_every: float = LIVENESS_CHECK) -> Listener:
        """A listener whose connection proves it is alive every ``check_every`` seconds."""

    def abort_stuck(self, older_than: float) -> int:
        """Makes the statements under way for ``older_than`` seconds or more fail at once, as
        when their connection was lost; returns how many. Only a networked backend can have
        statements stuck on a path that no longer carries anything."""
        return 0

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the data lives, with any password masked."""

    def fleet_clock(self) -> Clock:
        """The clock that coordination times (leases, timers, deadlines, TTLs) follow: the
        machine's own, unless workers on several hosts share the database."""
        return SYSTEM_CLOCK

    def query_set(self, package: str) -> QuerySet:
        """The query file ``sql/<dialect>.sql`` of a package (business queries)."""
        with self._query_sets_lock:
            if package not in self._query_sets:
                self._query_sets[package] = QuerySet.load(package, f"sql/{self.dialect}.sql")
            return self._query_sets[package]

    def channel(self, name: str) -> str:
        """The backend's name of a notification channel (a parameter of queries that notify)."""
        return name

    def notify(self, session: Session, channel: str, payload: str = "") -> None:
        if self.notifies:
            session.rows("notify", channel=self.channel(channel), payload=payload)
