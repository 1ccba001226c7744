"""The media pipeline's business records: the side-effect ledger and the media catalog.

They live in their own schema (PostgreSQL: the engine's schema + ``_media``; SQLite: the same
file) and are written only through fenced transactions of the step that acts.
"""

from umt.engine import MigrationSet

PACKAGE = "umt.records"
RECORDS_MIGRATIONS = MigrationSet("records", PACKAGE, schema_index=1)


def business_schema(engine_schema: str) -> str:
    return f"{engine_schema}_media"
