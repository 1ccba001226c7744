"""Executes one claimed run: replays recorded steps, runs the next ones, parks or finishes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any, TypeVar

from umt.engine.clock import Clock
from umt.engine.context import Interrupts, StepContext, WorkflowContext
from umt.engine.durations import parse_duration
from umt.engine.errors import (
    LeaseLost,
    PermanentError,
    ReplayDrift,
    RunCanceled,
    StepFailed,
    StepInterrupted,
    StoreError,
    StoreUnavailable,
    WorkerStopping,
    WorkflowDefinitionError,
)
from umt.engine.jsonvalues import to_json_value
from umt.engine.models import (
    COMPENSATION,
    MAIN,
    AttemptStatus,
    ReceivedSignal,
    RunStatus,
    StepStatus,
)
from umt.engine.retry import DEFAULT_RETRY, RetryPolicy
from umt.engine.store.database import Row, Session
from umt.engine.store.store import Store
from umt.engine.store.values import Claim, Fence, StepResult, error_json
from umt.engine.workflow import Workflow

log = logging.getLogger(__name__)

T = TypeVar("T")


class Outcome(Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PARKED = "parked"
    CANCELED = "canceled"
    LEASE_LOST = "lease_lost"
    HANDED_BACK = "handed_back"
    COMPENSATED = "compensated"


#: The line logged when an execution ends so (failures and cancellations log their own).
_OUTCOME_EVENTS = {
    Outcome.SUCCEEDED: "succeeded",
    Outcome.COMPENSATED: "compensation finished",
    Outcome.HANDED_BACK: "released (the worker is stopping; another execution continues it)",
}


class _Parked(BaseException):
    """The run is parked (sleep, signal wait, retry backoff); the execution ends here."""


@dataclass(frozen=True)
class ExecutionSettings:
    progress_interval: float = 1.0
    #: Give up retrying an unreachable database when this returns True.
    abandon: Callable[[], bool] = lambda: False


class RunExecution:
    def __init__(
        self, store: Store, claim: Claim, workflow: Workflow, clock: Clock,
        settings: ExecutionSettings | None = None,
    ) -> None:
        self.store = store
        self.claim = claim
        self.fence: Fence = claim.fence
        self.workflow = workflow
        self.clock = clock
        self.settings = settings or ExecutionSettings()
        self.interrupts = Interrupts()
        self.current_attempt_id: int | None = None
        self._position = 0
        self._name_counts: dict[str, int] = {}
        #: Once raised, drift stays raised: workflow code that catches it cannot go on.
        self._drift: ReplayDrift | None = None
        #: The last step's result, until it commits with the next operation (see ``step``).
        self._unsaved: StepResult | None = None

    # ------------------------------------------------------------------ whole run

    def execute(self) -> Outcome:
        run = self.claim.run
        log.info("run %s: claimed (%s %s, %s phase, lease epoch %d)", run.id, run.workflow,
                 run.version, self.fence.phase, self.fence.epoch)
        try:
            outcome = self._execute()
        except StoreUnavailable as exc:
            log.warning("run %s: database unreachable, leaving it to be reclaimed: %s",
                        self.fence.run_id, exc)
            return Outcome.LEASE_LOST
        if outcome in _OUTCOME_EVENTS:
            log.info("run %s: %s", run.id, _OUTCOME_EVENTS[outcome])
        return outcome

    def _execute(self) -> Outcome:
        context = WorkflowContext(self)
        try:
            if self.fence.phase == MAIN:
                output = self.workflow.run(context, self.claim.run.input)
                self._refuse_swallowed_drift()
                self._refuse_unreplayed_steps()
                value = to_json_value(output, what="the workflow's output")
                last = self._unsaved
                self._persist(lambda: self.store.complete_run(self.fence, value, completing=last))
                self._unsaved = None
                return Outcome.SUCCEEDED
            if self.workflow.compensate is not None:
                self.workflow.compensate(context, self.claim.run.input)
                self._refuse_swallowed_drift()
            self._save_unsaved()
            self._persist(lambda: self.store.finish_compensation(self.fence, error=None))
            return Outcome.COMPENSATED
        except _Parked:
            return Outcome.PARKED
        except ReplayDrift as drift:
            log.error("run %s stopped: %s", self.fence.run_id, drift)
            self._fail(drift, compensate=False)
            return Outcome.FAILED
        except RunCanceled:
            self._after_cancel()
            return Outcome.CANCELED
        except LeaseLost:
            log.warning("run %s: lease lost, another worker continues it", self.fence.run_id)
            return Outcome.LEASE_LOST
        except WorkerStopping:
            self._save_unsaved()
            self._persist(lambda: self.store.hand_back(self.fence, None, self._parked_status()))
            return Outcome.HANDED_BACK
        except Exception as error:  # a step used up its retries, or the workflow code raised
            if self._drift is not None:  # raised after the code swallowed a drift
                log.error("run %s stopped: %s", self.fence.run_id, self._drift)
                self._fail(self._drift, compensate=False)
                return Outcome.FAILED
            log.warning("run %s failed: %s", self.fence.run_id, error)
            self._fail(error, compensate=self.claim.compensable)
            return Outcome.FAILED

    def _fail(self, error: Exception, *, compensate: bool) -> None:
        self._save_unsaved()
        details = error_json(error)
        if self.fence.phase == MAIN:
            self._persist(lambda: self.store.fail_run(self.fence, details, compensate=compensate))
        else:
            self._persist(lambda: self.store.finish_compensation(self.fence, error=details))

    def _after_cancel(self) -> None:
        log.info("run %s was canceled during execution", self.fence.run_id)
        if self.claim.compensable:
            self._persist(
                lambda: self.store.expedite_compensation(self.fence.run_id, self.fence.worker_id)
            )

    def _refuse_unreplayed_steps(self) -> None:
        leftover = sorted(position for position in self.claim.steps if position >= self._position)
        if leftover:
            raise self._drifted(leftover[0], self.claim.steps[leftover[0]]["name"], None)

    def _drifted(self, position: int, recorded: str | None, requested: str | None) -> ReplayDrift:
        self._drift = ReplayDrift(position, recorded, requested)
        return self._drift

    def _refuse_swallowed_drift(self) -> None:
        if self._drift is not None:
            raise self._drift

    def _parked_status(self) -> str:
        return RunStatus.PENDING if self.fence.phase == MAIN else self.claim.run.status

    # ------------------------------------------------------------------ steps

    def _next(self, name: str, kind: str) -> tuple[int, str, Row | None]:
        self._refuse_swallowed_drift()
        if not name or "#" in name:
            raise WorkflowDefinitionError(f"step name {name!r} must be non-empty without '#'")
        count = self._name_counts.get(name, 0) + 1
        self._name_counts[name] = count
        unique = name if count == 1 else f"{name}#{count}"
        position = self._position
        self._position += 1
        recorded = self.claim.steps.get(position)
        if recorded is not None and recorded["kind"] != kind:
            raise self._drifted(position, f"{recorded['name']} ({recorded['kind']})",
                                f"{unique} ({kind})")
        if recorded is not None and recorded["name"] != unique:
            raise self._drifted(position, recorded["name"], unique)
        if recorded is None and any(p > position for p in self.claim.steps):
            raise self._drifted(position, None, unique)
        return position, unique, recorded

    def step(
        self, name: str, body: Callable[[StepContext], Any], *, retry: RetryPolicy | None,
        result_type: type[Any] | None,
    ) -> Any:
        position, unique, recorded = self._next(name, "step")
        if recorded is not None and recorded["status"] == StepStatus.SUCCEEDED:
            return _typed(recorded["result"], result_type)
        self.interrupts.raise_if_set()
        previous = self._unsaved
        attempt_id, attempt = self._persist(
            lambda: self.store.begin_step(self.fence, position, unique, completing=previous)
        )
        self._unsaved = None
        self.current_attempt_id = attempt_id
        log.debug("run %s: step %s started (attempt %d)", self.fence.run_id, unique, attempt)
        context = StepContext(
            self, step_name=unique, attempt=attempt, attempt_id=attempt_id,
            progress_interval=self.settings.progress_interval,
        )
        try:
            result = to_json_value(body(context), what=f"the result of step {unique!r}")
        except StepInterrupted as interruption:
            self._close_attempt(attempt_id, interruption)
            raise
        except Exception as error:
            self.current_attempt_id = None
            self._record_failure(position, unique, attempt_id, attempt, error, retry)
        log.debug("run %s: step %s finished (attempt %d)", self.fence.run_id, unique, attempt)
        statements = context.step_transaction.statements
        if not statements:
            # Only workflow code runs until the next operation for this run (the next step's
            # start, a sleep, the run's end, ...), so the result commits with it: one commit
            # and one round trip less per step. A crash in between re-executes this step, as a
            # crash just before its own commit would.
            self._unsaved = StepResult(position, attempt_id, result)
            self.current_attempt_id = None
            return _typed(result, result_type)
        try:
            self._persist(lambda: self.store.complete_step(
                self.fence, position, attempt_id, result, statements
            ))
        except StepInterrupted as interruption:
            self._close_attempt(attempt_id, interruption)
            raise
        except StoreUnavailable:
            raise
        except StoreError as error:
            # The step's own statements were refused (a constraint, bad SQL): nothing of the
            # attempt committed, so it failed like a body that raised.
            self.current_attempt_id = None
            self._record_failure(position, unique, attempt_id, attempt, error, retry)
        self.current_attempt_id = None
        return _typed(result, result_type)

    def _record_failure(
        self, position: int, name: str, attempt_id: int, attempt: int, error: Exception,
        retry: RetryPolicy | None,
    ) -> None:
        policy = retry or DEFAULT_RETRY
        final = isinstance(error, PermanentError | WorkflowDefinitionError) or not (
            policy.allows_another(attempt)
        )
        retry_in = None if final else policy.delay_after(attempt)
        log.info("run %s step %s attempt %d failed: %s%s", self.fence.run_id, name, attempt,
                 error, "" if final else f" (retry in {retry_in})")
        self._persist(lambda: self.store.fail_step(
            self.fence, position, attempt_id, error_json(error), retry_in=retry_in,
            run_status=self._parked_status(),
        ))
        if final:
            raise StepFailed(name, attempt, str(error) or type(error).__name__) from error
        raise _Parked()

    def _close_attempt(self, attempt_id: int, interruption: StepInterrupted) -> None:
        self.current_attempt_id = None
        if isinstance(interruption, WorkerStopping):
            self._persist(
                lambda: self.store.hand_back(self.fence, attempt_id, self._parked_status())
            )
            log.info("run %s: %s", self.fence.run_id, _OUTCOME_EVENTS[Outcome.HANDED_BACK])
            raise _Parked() from interruption
        status = (AttemptStatus.CANCELED if isinstance(interruption, RunCanceled)
                  else AttemptStatus.LEASE_LOST)
        try:
            self.store.close_attempt(attempt_id, status, error_json(interruption))
        except StoreUnavailable:
            log.warning("could not mark attempt %d as %s", attempt_id, status)

    def sleep(self, name: str, duration: timedelta | str) -> None:
        self._refuse_in_compensation("sleep")
        delta = parse_duration(duration) if isinstance(duration, str) else duration
        position, unique, recorded = self._next(name, "sleep")
        requested_at = self.clock.now()
        if recorded is not None:
            self._save_unsaved()
            if recorded["status"] == StepStatus.SUCCEEDED:
                return
            wake_at = recorded["wake_at"]
            if self.clock.now() >= wake_at:
                # The timer's end commits with the next operation, as a step's result does (a
                # crash in between finds the timer due again).
                self._unsaved = StepResult(position, None, None)
                return
            self._persist(lambda: self.store.park_again(self.fence, RunStatus.SLEEPING, wake_at))
            log.info("run %s: sleeping in %s until %s", self.fence.run_id, unique, wake_at)
            raise _Parked()
        self.interrupts.raise_if_set()
        wake_at = requested_at + delta
        previous = self._unsaved
        parked = self._persist(lambda: self.store.start_sleep(
            self.fence, position, unique, wake_at, completing=previous))
        self._unsaved = None
        if parked:
            log.info("run %s: sleeping in %s until %s", self.fence.run_id, unique, wake_at)
            raise _Parked()

    def wait_for_signal(
        self, name: str, signal: str, timeout: timedelta | str | None
    ) -> ReceivedSignal | None:
        self._refuse_in_compensation("wait_for_signal")
        delta = parse_duration(timeout) if isinstance(timeout, str) else timeout
        position, unique, recorded = self._next(name, "signal")
        if recorded is not None:
            self._save_unsaved()
            if recorded["signal_name"] != signal:
                raise self._drifted(position, f"{recorded['name']} ({recorded['signal_name']})",
                                    f"{unique} ({signal})")
            if recorded["status"] == StepStatus.SUCCEEDED:
                return _received(recorded["result"])
            if recorded["status"] == StepStatus.TIMED_OUT:
                return None
            deadline = recorded["wake_at"]
            if deadline is not None and self.clock.now() >= deadline:
                self._persist(lambda: self.store.finish_parked_step(
                    self.fence, position, StepStatus.TIMED_OUT))
                return None
        else:
            self.interrupts.raise_if_set()
            deadline = self.clock.now() + delta if delta is not None else None
        previous = self._unsaved
        received = self._persist(lambda: self.store.wait_for_signal(
            self.fence, position, unique, signal, deadline, completing=previous))
        self._unsaved = None
        if received is None:
            log.info("run %s: waiting in %s for signal %s%s", self.fence.run_id, unique, signal,
                     "" if deadline is None else f" until {deadline}")
            raise _Parked()
        return received

    def _refuse_in_compensation(self, what: str) -> None:
        if self.fence.phase == COMPENSATION:
            raise WorkflowDefinitionError(f"compensation cannot {what}; use steps only")

    # ------------------------------------------------------------------ step-body services

    def report_progress(self, attempt_id: int, progress: Any) -> None:
        try:
            accepted = self.store.report_progress(self.fence, attempt_id, progress)
        except StoreUnavailable:
            return  # progress is best effort; the next report or the heartbeat decides
        if not accepted:
            # Rejected: the run was canceled or taken over. The fence check tells which (and
            # raises RunCanceled or LeaseLost accordingly).
            try:
                with self.fenced_session():
                    pass
            except StoreUnavailable:
                pass
            self.interrupts.set(Interrupts.LEASE_LOST)
            self.interrupts.raise_if_set()

    @contextmanager
    def fenced_session(self) -> Iterator[Session]:
        try:
            with self.store.fenced(self.fence) as session:
                yield session
        except RunCanceled:
            self.interrupts.set(Interrupts.CANCELED)
            raise
        except LeaseLost:
            self.interrupts.set(Interrupts.LEASE_LOST)
            raise

    def _save_unsaved(self) -> None:
        """Commits the last step's result before an operation that does not carry it."""
        unsaved = self._unsaved
        if unsaved is not None:
            self._persist(lambda: self.store.complete_step(
                self.fence, unsaved.position, unsaved.attempt_id, unsaved.result
            ))
            self._unsaved = None

    def _persist(self, operation: Callable[[], T]) -> T:
        """Runs a store operation, waiting out database outages.

        Every operation is fenced and idempotent, so retrying after a lost connection is safe.
        """
        delay = 0.2
        while True:
            try:
                return operation()
            except StoreUnavailable as exc:
                if self.settings.abandon() or self.interrupts.reason == Interrupts.LEASE_LOST:
                    raise
                log.warning("run %s: database unavailable (%s); retrying in %.1fs",
                            self.fence.run_id, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)


def _typed(value: Any, result_type: type[Any] | None) -> Any:
    if result_type is None:
        return value
    validate = getattr(result_type, "model_validate", None)
    if callable(validate):
        return validate(value)
    return result_type(value)


def _received(result: dict[str, Any]) -> ReceivedSignal:
    return ReceivedSignal(result["signal_id"], result["name"], result["data"])
