"""Named SQL queries kept in ``.sql`` files.

A file holds blocks that start with a header line ``-- name: <query_name>``; everything up to
the next header is the query text. Queries are parsed once and referred to by name; no SQL is
assembled from strings anywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    sql: str


class QuerySet:
    def __init__(self, queries: dict[str, Query], origin: str) -> None:
        self._queries = queries
        self.origin = origin

    @classmethod
    def from_text(cls, text: str, origin: str) -> QuerySet:
        headers = list(_HEADER.finditer(text))
        if not headers:
            raise ValueError(f"{origin}: no '-- name: ...' query headers")
        queries: dict[str, Query] = {}
        for index, header in enumerate(headers):
            end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
            name = header.group(1)
            sql = text[header.end() : end].strip().rstrip(";").strip()
            if name in queries:
                raise ValueError(f"{origin}: query {name!r} defined twice")
            if not sql:
                raise ValueError(f"{origin}: query {name!r} is empty")
            queries[name] = Query(name, sql)
        return cls(queries, origin)

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
