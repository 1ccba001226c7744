"""Named SQL queries kept in ``.sql`` files.

A file holds blocks that start with a header line ``-- name: <query_name>``; everything up to
the next header is the query text. Queries are parsed once and referred to by name; no SQL is
assembled from strings anywhere else.

A block may include another block of the same file by writing its name in braces (``{fence}``):
the included text (without its comment lines) takes its place when the file is loaded, so a
condition shared by several queries is written once. A block may hold several statements, each
ending with ``;`` at the end of a line (SQLite writes one operation as a few statements; they
run in order, in the caller's transaction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    #: The statements of ``sql``, in order (one, except in a few SQLite blocks).
    statements: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.statements:
            object.__setattr__(self, "statements", _split(self.sql))


class QuerySet:
    def __init__(self, queries: dict[str, Query], origin: str) -> None:
        self._queries = queries
        self.origin = origin

    @classmethod
    def from_text(cls, text: str, origin: str) -> QuerySet:
        headers = list(_HEADER.finditer(text))
        if not headers:
            raise ValueError(f"{origin}: no '-- name: ...' query headers")
        blocks: dict[str, str] = {}
        for index, header in enumerate(headers):
            end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
            name = header.group(1)
            sql = text[header.end() : end].strip().rstrip(";").strip()
            if name in blocks:
                raise ValueError(f"{origin}: query {name!r} defined twice")
            if not sql:
                raise ValueError(f"{origin}: query {name!r} is empty")
            blocks[name] = sql
        expanded: dict[str, str] = {}
        for name in blocks:
            _expand(name, blocks, expanded, (), origin)
        return cls({name: Query(name, sql) for name, sql in expanded.items()}, origin)

    @classmethod
    def load(cls, package: str, filename: str) -> QuerySet:
        text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        return cls.from_text(text, f"{package}/{filename}")

    def __getitem__(self, name: str) -> Query:
        try:
            return self._queries[name]
        except KeyError:
            raise KeyError(f"{self.origin}: no query named {name!r}") from None

    def names(self) -> frozenset[str]:
        return frozenset(self._queries)


def _expand(
    name: str, blocks: dict[str, str], expanded: dict[str, str], including: tuple[str, ...],
    origin: str,
) -> str:
    if name in expanded:
        return expanded[name]
    if name in including:
        raise ValueError(f"{origin}: query {name!r} includes itself")
    if name not in blocks:
        raise ValueError(f"{origin}: {including[-1]!r} includes {name!r}, which is not defined")

    def include(match: re.Match[str]) -> str:
        text = _expand(match.group(1), blocks, expanded, (*including, name), origin)
        return "\n".join(line for line in text.splitlines() if not _is_comment(line))

    expanded[name] = _INCLUDE.sub(include, blocks[name])
    return expanded[name]


def _split(sql: str) -> tuple[str, ...]:
    """The statements of a block: each ends with a code line (not a comment) ending in ``;``."""
    statements: list[str] = []
    lines: list[str] = []
    for line in sql.splitlines():
        lines.append(line)
        if not _is_comment(line) and line.rstrip().endswith(";"):
            statements.append("\n".join(lines).rstrip().removesuffix(";").strip())
            lines = []
    statements.append("\n".join(lines).strip())
    return tuple(statement for statement in statements
                 if any(line.strip() and not _is_comment(line)
                        for line in statement.splitlines()))


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("--")
