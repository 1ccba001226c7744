"""Database URLs: which backend, where, and how to show them without secrets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit


class InvalidDatabaseUrl(ValueError):
    pass


@dataclass(frozen=True)
class DatabaseTarget:
    """Where the engine keeps its tables. ``url`` may hold a password, so it is kept out of repr."""

    kind: Literal["postgresql", "sqlite"]
    url: str = field(repr=False)
    sqlite_path: Path | None = None


def parse_database_url(url: str, *, cwd: Path | None = None) -> DatabaseTarget:
    """Parse ``postgresql://…``, ``sqlite:///relative.db`` (to ``cwd``) or ``sqlite:////abs.db``.

    In-memory SQLite (``sqlite://``, ``sqlite:///:memory:``) is refused: the engine's state must
    outlive the process and be shared by every worker.
    """
    scheme, separator, rest = url.partition("://")
    scheme = scheme.lower()
    if separator and scheme in ("postgresql", "postgres"):
        return DatabaseTarget("postgresql", url)
    if separator and scheme == "sqlite":
        path = _sqlite_path(url, rest, cwd or Path.cwd())
        return DatabaseTarget("sqlite", f"sqlite:///{path}", path)
    raise InvalidDatabaseUrl(
        f"unsupported database URL {mask_database_url(url)!r}: use postgresql://user@host/db,"
        " sqlite:///relative.db or sqlite:////absolute/path.db"
    )


def _sqlite_path(url: str, rest: str, cwd: Path) -> Path:
    shown = mask_database_url(url)
    if rest in ("", "/", "/:memory:"):
        raise InvalidDatabaseUrl(
            f"SQLite URL {shown!r} names no file (in-memory databases are not supported):"
            " use sqlite:///umt.db or sqlite:////absolute/path.db"
        )
    if not rest.startswith("/"):
        raise InvalidDatabaseUrl(
            f"SQLite URL {shown!r} has a host part: use sqlite:///relative.db"
            " or sqlite:////absolute/path.db (three or four slashes)"
        )
    if "?" in rest or "#" in rest:
        raise InvalidDatabaseUrl(f"SQLite URL {shown!r}: query parameters are not supported")
    path = Path(rest[1:])
    return path if path.is_absolute() else cwd / path


def mask_database_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (userinfo and ``password=`` query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = re.sub(r"(^|&)(password=)[^&]*", r"\1\2***", parts.query, flags=re.IGNORECASE)
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # geturl() would turn sqlite://// into sqlite://
    return parts._replace(netloc=netloc, query=query).geturl()
