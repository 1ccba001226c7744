"""What a worker records while it executes a run: steps, timers, signal waits, the end."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from umt.engine.jsonvalues import canonical_json
from umt.engine.models import (
    CompensationStatus,
    ReceivedSignal,
)
from umt.engine.store.database import WORK_CHANNEL
from umt.engine.store.fencing import Fencing
from umt.engine.store.values import BufferedStatement, Fence, StepResult, validate_signal_name


class Steps(Fencing):
    """Every write of a run's execution, fenced."""

    def begin_step(
        self, fence: Fence, position: int, name: str, *, completing: StepResult | None = None
    ) -> tuple[int, int]:
        """Records that an attempt of a step starts, and commits ``completing`` (the previous
        step's result) with it. Returns (attempt id, attempt number)."""
        row = self._fenced_operation("begin_step", fence, position=position, name=name,
                                     **_completing(completing), now=self.clock.now())
        return int(row["id"]), int(row["attempt"])

    def complete_step(
        self, fence: Fence, position: int, attempt_id: int | None, result: Any,
        statements: Sequence[BufferedStatement] = (),
    ) -> None:
        """Commits a step's result together with the step's buffered business statements."""
        params = {**_completing(StepResult(position, attempt_id, result)), "now": self.clock.now()}
        if not statements:
            self._fenced_operation("complete_step", fence, **params)
            return
        # Business statements need a transaction; they run only if the result committed now
        # (not when a retried commit finds that its first try did commit).
        with self.database.transaction() as session:
            if self._fenced_row(session, "complete_step", fence, params)["completed"]:
                for statement in statements:
                    session.execute(statement.query, statement.params)

    def fail_step(
        self, fence: Fence, position: int, attempt_id: int, error: dict[str, Any],
        *, retry_in: timedelta | None, run_status: str,
    ) -> int:
        """Records a failed attempt. With ``retry_in`` the run is released until then;
        otherwise the step is failed for good. Returns the step's failure count."""
        now = self.clock.now()
        row = self._fenced_operation(
            "fail_step", fence, position=position, attempt_id=attempt_id,
            error=canonical_json(error), retry=retry_in is not None, status=run_status,
            due_at=None if retry_in is None else now + retry_in, now=now,
        )
        return int(row["failures"])

    def start_sleep(
        self, fence: Fence, position: int, name: str, wake_at: datetime, *,
        completing: StepResult | None = None,
    ) -> bool:
        """Records a durable timer, and commits ``completing`` (the previous step's result) with
        it. Returns whether the run is now parked (False: already due)."""
        now = self.clock.now()
        due = wake_at <= now
        self._fenced_operation("start_sleep", fence, position=position, name=name,
                               wake_at=wake_at, park=not due, **_completing(completing),
                               now=now)
        return not due

    def finish_parked_step(self, fence: Fence, position: int, status: str) -> None:
        """A timer fired (``succeeded``) or a signal wait timed out (``timed_out``)."""
        self._fenced_operation("finish_parked_step", fence, position=position, status=status,
                               now=self.clock.now())

    def park_again(self, fence: Fence, status: str, due_at: datetime) -> None:
        """The run was claimed before its timer: park it again without doing anything."""
        self._fenced_operation("park_again", fence, status=status, due_at=due_at,
                               now=self.clock.now())

    def wait_for_signal(
        self, fence: Fence, position: int, name: str, signal_name: str,
        deadline: datetime | None, *, completing: StepResult | None = None,
    ) -> ReceivedSignal | None:
        """Consumes a kept signal if there is one; otherwise parks the run until one arrives
        (or until ``deadline``; ``None`` waits without limit). ``completing`` (the previous
        step's result) commits with it."""
        validate_signal_name(signal_name)
        # The query takes the name lock before the run lock, in the same order as send_signal.
        row = self._fenced_operation(
            "wait_for_signal", fence, position=position, name=name, signal_name=signal_name,
            wake_at=deadline, take_kept=True, **_completing(completing), now=self.clock.now(),
        )
        received = row["received"]
        if received is None:
            return None
        return ReceivedSignal(received["signal_id"], signal_name, received["data"])

    def complete_run(
        self, fence: Fence, output: Any, *, completing: StepResult | None = None
    ) -> None:
        """The run succeeded; ``completing`` (its last step's result) commits with it."""
        self._fenced_operation("complete_run", fence, output=canonical_json(output),
                               **_completing(completing), now=self.clock.now())

    def fail_run(self, fence: Fence, error: dict[str, Any], *, compensate: bool) -> None:
        self._fenced_operation("fail_run", fence, error=canonical_json(error),
                               compensate=compensate, now=self.clock.now())

    def finish_compensation(self, fence: Fence, *, error: dict[str, Any] | None) -> None:
        self._fenced_operation(
            "finish_compensation", fence, now=self.clock.now(),
            compensation=CompensationStatus.FAILED if error else CompensationStatus.SUCCEEDED,
            error=canonical_json({"compensation": error}) if error else None,
        )

    def hand_back(self, fence: Fence, attempt_id: int | None, run_status: str) -> None:
        """A stopping worker returns a run it could not finish; it is due again at once."""
        self._fenced_operation("hand_back", fence, attempt_id=attempt_id, status=run_status,
                               now=self.clock.now())

    def report_progress(self, fence: Fence, attempt_id: int, progress: Any) -> bool:
        with self.database.autocommit() as session:
            changed = session.count(
                "report_progress", attempt_id=attempt_id, progress=canonical_json(progress),
                now=self.clock.now(), run_id=fence.run_id, worker_id=fence.worker_id,
                lease_epoch=fence.epoch,
            )
        return changed > 0

    def close_attempt(self, attempt_id: int, status: str, error: dict[str, Any] | None) -> None:
        """Closes this worker's own attempt after it lost the run (no fence: the row is ours
        and only changes while it still says ``running``)."""
        with self.database.autocommit() as session:
            session.rows("finish_attempt", attempt_id=attempt_id, status=status,
                         now=self.clock.now(), error=canonical_json(error) if error else None)

    def expedite_compensation(self, run_id: str, worker_id: str) -> None:
        """After a canceled step stopped, its compensation need not wait for the old lease."""
        with self.database.transaction() as session:
            row = session.row("expedite_compensation", run_id=run_id, worker_id=worker_id,
                              now=self.clock.now())
            if row is not None:
                self.database.notify(session, WORK_CHANNEL, row["workflow_key"])


def _completing(step: StepResult | None) -> dict[str, object]:
    """Parameters of a query that also commits an earlier step's result (NULL: none)."""
    if step is None:
        return {"completed_position": None, "completed_attempt_id": None,
                "completed_result": None}
    return {"completed_position": step.position, "completed_attempt_id": step.attempt_id,
            "completed_result": None if step.attempt_id is None else canonical_json(step.result)}
