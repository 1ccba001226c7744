"""The side-effect ledger: what a step is about to do to the outside world, and what it did.

Every entry is stamped with run, step, attempt, worker and lease epoch and written through a
fenced transaction, so a worker that lost its run cannot add to it. Re-executed steps read it
to skip work already done; ``umt show`` prints it as the audit trail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from umt.engine import Database, StepContext, canonical_json
from umt.records import PACKAGE

INTENT = "intent"
VERIFIED = "verified"
DONE = "done"
FAILED = "failed"
SKIPPED = "skipped"


@dataclass(frozen=True)
class LedgerEntry:
    id: int
    run_id: str
    step: str
    attempt: int
    worker_id: str
    lease_epoch: int
    operation: str
    phase: str
    detail: dict[str, Any]
    recorded_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LedgerEntry:
        return cls(
            id=row["id"], run_id=row["run_id"], step=row["step"], attempt=row["attempt"],
            worker_id=row["worker_id"], lease_epoch=row["lease_epoch"],
            operation=row["operation"], phase=row["phase"], detail=row["detail"] or {},
            recorded_at=row["recorded_at"],
        )


def _params(
    step: StepContext, operation: str, phase: str, detail: Mapping[str, Any] | None
) -> dict[str, object]:
    return {
        "run_id": step.run_id, "step": step.step_name, "attempt": step.attempt,
        "worker_id": step.worker_id, "lease_epoch": step.lease_epoch,
        "operation": operation, "phase": phase,
        "detail": canonical_json(dict(detail or {})), "recorded_at": step.now(),
    }


def record(
    step: StepContext, operation: str, phase: str, detail: Mapping[str, Any] | None = None
) -> None:
    """Writes an entry now, fenced: raises ``LeaseLost``/``RunCanceled`` if the run is gone."""
    query = step.query_set(PACKAGE)["insert_ledger_entry"]
    with step.transaction() as session:
        session.execute(query, _params(step, operation, phase, detail))


def record_with_result(
    step: StepContext, operation: str, phase: str, detail: Mapping[str, Any] | None = None
) -> None:
    """Adds an entry that commits together with the step's result, or not at all."""
    query = step.query_set(PACKAGE)["insert_ledger_entry"]
    step.step_transaction.execute(query, _params(step, operation, phase, detail))


def entries_of_operation(step: StepContext, operation: str) -> list[LedgerEntry]:
    """This run's entries for one operation, oldest first (every attempt, every worker)."""
    query = step.query_set(PACKAGE)["ledger_entries_of_operation"]
    with step.reader() as session:
        rows = session.execute(query, {"run_id": step.run_id, "operation": operation})
    return [LedgerEntry.from_row(row) for row in rows]


def last_entry(entries: list[LedgerEntry], phase: str) -> LedgerEntry | None:
    found = [entry for entry in entries if entry.phase == phase]
    return found[-1] if found else None


def entries_of_run(database: Database, run_id: str) -> list[LedgerEntry]:
    query = database.query_set(PACKAGE)["ledger_entries_of_run"]
    with database.autocommit() as session:
        return [LedgerEntry.from_row(row) for row in session.execute(query, {"run_id": run_id})]


def runs_of_operation(database: Database, operation: str) -> list[str]:
    """The runs that recorded ``operation`` (e.g. the add of one torrent), oldest first."""
    query = database.query_set(PACKAGE)["runs_of_operation"]
    with database.autocommit() as session:
        return [str(row["run_id"]) for row in session.execute(query, {"operation": operation})]


def entries_of_this_run(step: StepContext) -> list[LedgerEntry]:
    query = step.query_set(PACKAGE)["ledger_entries_of_run"]
    with step.reader() as session:
        rows = session.execute(query, {"run_id": step.run_id})
    return [LedgerEntry.from_row(row) for row in rows]
