"""Errors raised by the durable engine.

Two families:

* ``EngineError`` (an ``Exception``): something the caller asked for cannot be done
  (unknown run, idempotency conflict, database unreachable, ...).
* ``StepInterrupted`` (a ``BaseException``): raised *inside* a step body by
  ``StepContext.check()`` when the run no longer belongs to this execution. It derives from
  ``BaseException`` so that a body's ``except Exception`` cannot swallow it.
"""

from __future__ import annotations

from typing import ClassVar

#: The exit codes the command line gives these errors (see ``umt.cli.errors``): the operation
#: failed, or the input was wrong.
FAILED = 1
BAD_INPUT = 2


class EngineError(Exception):
    """Base class of every error the engine reports to its callers."""

    exit_code: ClassVar[int] = FAILED


class StoreError(EngineError):
    """The database failed in a way the engine does not handle itself."""


class StoreUnavailable(StoreError):
    """The database cannot be reached (connection refused, dropped, restarting)."""


class StoreReadOnly(StoreError):
    """The database file or server refuses writes."""


class StoreCorrupt(StoreError):
    """The database file is not a usable database."""


class SingleHostDatabase(StoreError):
    """A worker on another host uses this database, which serves one machine (SQLite)."""


class SchemaNotReady(StoreError):
    """The schema is missing or older than this code; run ``umt db migrate``."""


class SchemaTooNew(StoreError):
    """The schema was migrated by a newer version of umt; this version must not touch it."""


class UnknownRun(EngineError):
    exit_code = BAD_INPUT

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id}")
        self.run_id = run_id


class UnknownWorkflow(EngineError):
    def __init__(self, name: str, version: str | None = None) -> None:
        label = name if version is None else f"{name} (version {version})"
        super().__init__(f"workflow {label} is not registered")


class RunFinished(EngineError):
    """The run already reached a final status, so the operation no longer applies."""

    def __init__(self, run_id: str, status: str, action: str) -> None:
        super().__init__(f"cannot {action} run {run_id}: it is already {status}")
        self.run_id = run_id
        self.status = status


class IdempotencyConflict(EngineError):
    """The idempotency key is held by a run that was started with a different input."""

    def __init__(self, workflow: str, key: str, run_id: str) -> None:
        super().__init__(
            f"idempotency key {key!r} of workflow {workflow} is held by run {run_id}, "
            "which was started with a different input"
        )
        self.run_id = run_id
        self.key = key


class SignalKeyConflict(EngineError):
    def __init__(self, key: str) -> None:
        super().__init__(
            f"signal idempotency key {key!r} was already used for a different signal "
            "(another name, target run or data)"
        )
        self.key = key


class InvalidSignalName(EngineError, ValueError):
    exit_code = BAD_INPUT


class WorkflowDefinitionError(EngineError):
    """A workflow function used the context in a way the engine cannot make durable."""


class ReplayDrift(EngineError):
    """The workflow code no longer matches the step sequence recorded for a run."""

    def __init__(self, position: int, recorded: str | None, requested: str | None) -> None:
        if requested is None:
            detail = f"recorded step {recorded!r} is no longer called by the code"
        elif recorded is None:
            detail = f"the code calls {requested!r} where nothing was recorded"
        else:
            detail = f"recorded {recorded!r}, the code now asks for {requested!r}"
        super().__init__(f"replay drift at step {position}: {detail}")
        self.position = position
        self.recorded = recorded
        self.requested = requested


class StepFailed(EngineError):
    """A step used up its retry policy; the run fails with this error."""

    def __init__(self, step: str, attempts: int, message: str) -> None:
        super().__init__(f"step {step!r} failed after {attempts} attempt(s): {message}")
        self.step = step
        self.attempts = attempts


class PermanentError(Exception):
    """Raise (or subclass) in a step body to fail the step without further retries."""


class StepInterrupted(BaseException):
    """The step body must stop: the run is no longer this execution's to advance."""


class RunCanceled(StepInterrupted):
    """The run was canceled while this step was executing."""


class LeaseLost(StepInterrupted):
    """Another worker took the run over; every further write of this execution is rejected."""


class WorkerStopping(StepInterrupted):
    """The worker is shutting down and hands the run back to be resumed elsewhere."""
