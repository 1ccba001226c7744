"""Runs as clients see them: create, read, list, cancel, annotate, wait."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from umt.engine.errors import IdempotencyConflict, RunCanceled, RunFinished, StoreError, UnknownRun
from umt.engine.jsonvalues import canonical_json
from umt.engine.models import (
    FINAL_STATUSES,
    Attempt,
    CompensationStatus,
    Run,
    RunsPage,
    RunStatus,
    StartResult,
    Step,
)
from umt.engine.store.base import StoreBase
from umt.engine.store.database import (
    CANCEL_CHANNEL,
    WORK_CHANNEL,
    ChangeMarker,
    Session,
    due_run_payload,
)
from umt.engine.store.values import error_json, like_escaped, valid_run_id


class Runs(StoreBase):
    """Runs as clients see them (part of ``Engine``)."""

    def create_run(
        self,
        *,
        workflow: str,
        version: str,
        input_value: Any,
        idempotency_key: str | None,
        compensable: bool,
        start_at: datetime | None = None,
        session: Session | None = None,
    ) -> StartResult:
        input_json = canonical_json(input_value)
        now = self.clock.now()
        # The run as insert_run writes it: the columns it does not give take their defaults
        # (no lease, epoch 0, no output yet). Only its id is read back: decoding a whole row
        # of runs costs a submit about a sixth of its time.
        new = Run(
            id=str(uuid.uuid4()), workflow=workflow, version=version, status=RunStatus.PENDING,
            input=json.loads(input_json), output=None, error=None,
            idempotency_key=idempotency_key, compensation=None, detail=None,
            due_at=max(start_at, now) if start_at else now, lease_owner=None, lease_epoch=0,
            lease_expires_at=None, created_at=now, updated_at=now, started_at=None,
            finished_at=None,
        )
        if session is not None:
            return self._create_run(session, new, input_json, compensable)
        with self.database.operation() as own_session:
            return self._create_run(own_session, new, input_json, compensable)

    def _create_run(
        self, session: Session, new: Run, input_json: str, compensable: bool
    ) -> StartResult:
        for _ in range(2):
            row = session.row(
                "insert_run", id=new.id, workflow_name=new.workflow,
                workflow_version=new.version, workflow_key=new.key, input=input_json,
                idempotency_key=new.idempotency_key, compensable=compensable,
                due_at=new.due_at, now=new.created_at, work_channel=self._work_channel,
                work_payload=_work_payload(new),
            )
            if row is not None:
                return StartResult(new, created=True)
            holder = session.row("run_holding_key", workflow_name=new.workflow,
                                 idempotency_key=new.idempotency_key)
            if holder is not None:
                existing = Run.from_row(holder)
                if canonical_json(existing.input) != input_json:
                    raise IdempotencyConflict(new.workflow, str(new.idempotency_key),
                                              existing.id)
                return StartResult(existing, created=False)
            # The run holding the key released it meanwhile: try again, once.
        raise StoreError("the idempotency key was released concurrently; try again")

    def get(self, run_id: str) -> Run:
        if not valid_run_id(run_id):
            raise UnknownRun(run_id)
        with self.database.autocommit() as session:
            row = session.row("get_run", run_id=run_id)
        if row is None:
            raise UnknownRun(run_id)
        return Run.from_row(row)

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 50
    ) -> list[Run]:
        with self.database.autocommit() as session:
            rows = session.rows("list_runs", status=status, workflow=workflow, limit=limit)
        return [Run.from_row(row) for row in rows]

    def runs_page(
        self, *, status: str | None = None, search: str | None = None,
        before: tuple[datetime, str] | None = None, limit: int = 50,
    ) -> RunsPage:
        """Runs newest first, ``limit`` at a time: pass the page's ``next_key`` as ``before`` to
        get the next one. ``search`` matches the title or the info-hash (any part, any case)."""
        pattern = f"%{like_escaped(search)}%" if search else None
        before_created_at, before_id = before if before is not None else (None, None)
        if before_id is not None and not valid_run_id(before_id):
            raise UnknownRun(before_id)
        with self.database.autocommit() as session:
            keyset = {"pattern": pattern, "limit": limit + 1,
                      "before_created_at": before_created_at, "before_id": before_id}
            if status is None:
                rows = session.rows("runs_page", **keyset)
            else:
                rows = session.rows("runs_page_of_status", status=status, **keyset)
        runs = [Run.from_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return RunsPage(runs, (runs[-1].created_at, runs[-1].id) if more else None)

    def count_runs_by_status(self) -> dict[str, int]:
        with self.database.autocommit() as session:
            return {row["status"]: int(row["runs"]) for row in session.rows("count_runs_by_status")}

    def steps(self, run_id: str) -> list[Step]:
        self.get(run_id)
        with self.database.autocommit() as session:
            return [Step.from_row(row) for row in session.rows("steps_of_run", run_id=run_id)]

    def attempts(self, run_id: str) -> list[Attempt]:
        self.get(run_id)
        with self.database.autocommit() as session:
            rows = session.rows("attempts_of_run", run_id=run_id)
        return [Attempt.from_row(row) for row in rows]

    def running_attempts(self, run_ids: Sequence[str]) -> list[Attempt]:
        """The attempts being executed now in these runs (with their progress)."""
        ids = [run_id for run_id in run_ids if valid_run_id(run_id)]
        if not ids:
            return []
        with self.database.autocommit() as session:
            rows = session.rows("running_attempts_of_runs", run_ids=ids)
        return [Attempt.from_row(row) for row in rows]

    def change_marker(self, workflow_keys: Sequence[str] = ()) -> ChangeMarker:
        """What a live reader watches besides notifications (see ``Database.change_marker``)."""
        return self.database.change_marker(workflow_keys)

    def cancel(self, run_id: str) -> Run:
        if not valid_run_id(run_id):
            raise UnknownRun(run_id)
        now = self.clock.now()
        with self.database.transaction() as session:
            current = session.row("lock_run", run_id=run_id)
            if current is None:
                raise UnknownRun(run_id)
            if current["status"] in FINAL_STATUSES:
                raise RunFinished(run_id, current["status"], "cancel")
            row = session.row("cancel_run", run_id=run_id, now=now)
            assert row is not None
            session.rows("cancel_open_steps", run_id=run_id, now=now)
            session.rows("cancel_running_attempts", run_id=run_id, now=now, error=canonical_json(
                error_json(RunCanceled(f"run {run_id} was canceled"))))
            self.database.notify(session, CANCEL_CHANNEL, run_id)
            if row["due_at"] is not None:
                self.database.notify(session, WORK_CHANNEL, row["workflow_key"])
        return Run.from_row(row)

    def annotate(self, run_id: str, detail: str | None) -> None:
        if not valid_run_id(run_id):
            raise UnknownRun(run_id)
        with self.database.transaction() as session:
            changed = session.count(
                "annotate_run", run_id=run_id, detail=detail, now=self.clock.now()
            )
        if changed == 0:
            raise UnknownRun(run_id)

    def wait(self, run_id: str, timeout: float, *, poll: float = 0.2) -> Run:
        """Polls until the run is final (and done compensating) or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.get(run_id)
            settled = run.finished and run.compensation not in (CompensationStatus.PENDING,
                                                             CompensationStatus.RUNNING)
            if settled or time.monotonic() >= deadline:
                return run
            time.sleep(poll)


def _work_payload(new: Run) -> str:
    """A run due now is named, so that one worker claims it; one due later wakes every worker
    of its workflow to look when it falls due."""
    if new.due_at == new.created_at:
        return due_run_payload(new.id, new.key)
    return new.key
