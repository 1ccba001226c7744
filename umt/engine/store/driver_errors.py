"""The one place where database driver errors become engine errors.

Drivers are imported lazily so that a command that never touches PostgreSQL does not pay for
importing psycopg.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from umt.engine.errors import (
    SchemaNotReady,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
)


class UniqueViolation(StoreError):
    """A unique constraint refused a row (handled inside the store)."""


@contextmanager
def postgres_errors(where: str) -> Iterator[None]:
    import psycopg
    import psycopg_pool
    from psycopg import errors as pg

    try:
        yield
    except psycopg_pool.PoolTimeout as exc:
        raise StoreUnavailable(f"PostgreSQL at {where} is not reachable") from exc
    except pg.UniqueViolation as exc:
        raise UniqueViolation(str(exc)) from exc
    except (pg.UndefinedTable, pg.InvalidSchemaName) as exc:
        raise SchemaNotReady(
            f"the umt schema is missing in {where}; run `umt db migrate`"
        ) from exc
    except pg.ReadOnlySqlTransaction as exc:
        raise StoreReadOnly(f"PostgreSQL at {where} refuses writes (read-only)") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"lost the connection to PostgreSQL at {where}") from exc


@contextmanager
def sqlite_errors(where: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if "UNIQUE" in str(exc):
            raise UniqueViolation(str(exc)) from exc
        raise StoreError(f"SQLite database {where}: {exc}") from exc
    except sqlite3.OperationalError as exc:
        raise _translate_sqlite_operational(exc, where) from exc
    except sqlite3.DatabaseError as exc:
        raise StoreCorrupt(f"{where} is not a usable SQLite database ({exc})") from exc


def _translate_sqlite_operational(exc: sqlite3.OperationalError, where: str) -> StoreError:
    message = str(exc)
    code = getattr(exc, "sqlite_errorname", None)
    if code and code not in message:
        message = f"{message}, {code}"
    if "no such table" in message:
        return SchemaNotReady(f"the umt tables are missing in {where}; run `umt db migrate`")
    if "readonly" in message or "read-only" in message:
        return StoreReadOnly(f"SQLite database {where} is read-only ({message})")
    if "unable to open" in message:
        return StoreUnavailable(f"cannot open the SQLite database {where} ({message})")
    if "locked" in message or "busy" in message:
        return StoreUnavailable(f"SQLite database {where} stayed locked ({message})")
    if "disk I/O" in message or "database or disk is full" in message:
        return StoreUnavailable(f"SQLite database {where}: {message}")
    return StoreError(f"SQLite database {where}: {message}")
