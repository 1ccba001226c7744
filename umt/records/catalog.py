"""The media catalog: one row per finished import, written with the register step's result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from umt.engine import Database, StepContext, canonical_json, like_escaped
from umt.records import PACKAGE


@dataclass(frozen=True)
class CatalogItem:
    run_id: str
    title: str
    info_hash: str
    library_paths: list[str]
    size: int
    content_hash: str | None
    import_method: str
    imported_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CatalogItem:
        return cls(
            run_id=row["run_id"], title=row["title"], info_hash=row["info_hash"],
            library_paths=list(row["library_paths"]), size=row["size"],
            content_hash=row["content_hash"], import_method=row["import_method"],
            imported_at=row["imported_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "title": self.title, "info_hash": self.info_hash,
            "library_paths": self.library_paths, "size": self.size,
            "content_hash": self.content_hash, "import_method": self.import_method,
            "imported_at": self.imported_at.isoformat(),
        }


def add_with_result(step: StepContext, item: CatalogItem) -> None:
    """Inserts the item in the same transaction as the step's result: exactly once."""
    query = step.query_set(PACKAGE)["insert_catalog_item"]
    step.step_transaction.execute(query, {
        "run_id": item.run_id, "title": item.title, "info_hash": item.info_hash,
        "library_paths": canonical_json(item.library_paths), "size": item.size,
        "content_hash": item.content_hash, "import_method": item.import_method,
        "imported_at": item.imported_at,
    })


def item_of_run(database: Database, run_id: str) -> CatalogItem | None:
    query = database.query_set(PACKAGE)["catalog_item_of_run"]
    with database.autocommit() as session:
        rows = session.execute(query, {"run_id": run_id})
    return CatalogItem.from_row(rows[0]) if rows else None


def item_of_this_run(step: StepContext) -> CatalogItem | None:
    query = step.query_set(PACKAGE)["catalog_item_of_run"]
    with step.reader() as session:
        rows = session.execute(query, {"run_id": step.run_id})
    return CatalogItem.from_row(rows[0]) if rows else None


def items(database: Database, *, limit: int = 100) -> list[CatalogItem]:
    query = database.query_set(PACKAGE)["catalog_items"]
    with database.autocommit() as session:
        return [CatalogItem.from_row(row) for row in session.execute(query, {"limit": limit})]


def search(database: Database, text: str, *, limit: int = 100) -> list[CatalogItem]:
    """Items whose title or info-hash contains ``text`` (any case), newest first."""
    query = database.query_set(PACKAGE)["search_catalog"]
    pattern = f"%{like_escaped(text)}%"
    with database.autocommit() as session:
        rows = session.execute(query, {"pattern": pattern, "limit": limit})
    return [CatalogItem.from_row(row) for row in rows]
