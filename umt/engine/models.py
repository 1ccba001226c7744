"""What the engine reports about runs, steps, attempts and signals."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    """The statuses users see. Only ``running`` runs hold a worker slot.

    pending   ready to run, or waiting out a retry backoff
    running   a worker holds its lease right now
    waiting   parked until a signal arrives (or its timeout)
    sleeping  parked until a durable timer fires
    succeeded / failed / canceled   final
    """

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    SLEEPING = "sleeping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


FINAL_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED})

MAIN = "main"
COMPENSATION = "compensation"


@dataclass(frozen=True)
class Run:
    id: str
    workflow: str
    version: str
    status: str
    input: Any
    output: Any
    error: dict[str, Any] | None
    idempotency_key: str | None
    compensation: str | None
    detail: str | None
    due_at: datetime | None
    lease_owner: str | None
    lease_epoch: int
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def key(self) -> str:
        return f"{self.workflow}@{self.version}"

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Run:
        return cls(
            id=row["id"], workflow=row["workflow_name"], version=row["workflow_version"],
            status=row["status"], input=row["input"], output=row["output"], error=row["error"],
            idempotency_key=row["idempotency_key"], compensation=row["compensation"],
            detail=row["detail"], due_at=row["due_at"], lease_owner=row["lease_owner"],
            lease_epoch=row["lease_epoch"], lease_expires_at=row["lease_expires_at"],
            created_at=row["created_at"], updated_at=row["updated_at"],
            started_at=row["started_at"], finished_at=row["finished_at"],
        )


@dataclass(frozen=True)
class Step:
    run_id: str
    phase: str
    position: int
    name: str
    kind: str
    status: str
    result: Any
    error: dict[str, Any] | None
    failures: int
    attempts: int
    signal_name: str | None
    wake_at: datetime | None
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Step:
        return cls(
            run_id=row["run_id"], phase=row["phase"], position=row["position"],
            name=row["name"], kind=row["kind"], status=row["status"], result=row["result"],
            error=row["error"], failures=row["failures"], attempts=int(row.get("attempts", 0)),
            signal_name=row["signal_name"], wake_at=row["wake_at"],
            created_at=row["created_at"], finished_at=row["finished_at"],
        )


@dataclass(frozen=True)
class Attempt:
    id: int
    run_id: str
    phase: str
    position: int
    step_name: str
    attempt: int
    status: str
    worker_id: str
    lease_epoch: int
    started_at: datetime
    finished_at: datetime | None
    error: dict[str, Any] | None
    progress: dict[str, Any] | None
    progress_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Attempt:
        return cls(
            id=row["id"], run_id=row["run_id"], phase=row["phase"], position=row["position"],
            step_name=row["step_name"], attempt=row["attempt"], status=row["status"],
            worker_id=row["worker_id"], lease_epoch=row["lease_epoch"],
            started_at=row["started_at"], finished_at=row["finished_at"], error=row["error"],
            progress=row["progress"], progress_at=row["progress_at"],
        )


@dataclass(frozen=True)
class StartResult:
    run: Run
    #: False when an idempotency key returned an existing run.
    created: bool


@dataclass(frozen=True)
class SignalResult:
    signal_id: str
    name: str
    #: Runs that were waiting and received the signal now.
    delivered_to: tuple[str, ...]
    #: Nobody waited: the signal is kept until a run waits for it or it expires.
    kept: bool
    #: The idempotency key had been used: this is the first send's outcome, nothing was sent.
    duplicate: bool


@dataclass(frozen=True)
class ReceivedSignal:
    id: str
    name: str
    data: Any


@dataclass(frozen=True)
class WaitingRun:
    run_id: str
    #: Position of the waiting step in the run (distinguishes repeated waits).
    position: int
    workflow: str
    signal_name: str
    deadline: datetime | None
    detail: str | None


@dataclass(frozen=True)
class LiveWorker:
    """A worker that has not stopped and whose heartbeat is recent."""

    id: str
    hostname: str
    pid: int
    workflows: list[str]
    started_at: datetime
    heartbeat_at: datetime


@dataclass(frozen=True)
class RunsPage:
    runs: list[Run]
    #: (created_at, id) of the last run, to ask for the next page; None on the last page.
    next_key: tuple[datetime, str] | None
