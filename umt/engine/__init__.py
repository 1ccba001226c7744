"""umt's durable workflow engine. It knows nothing about media.

    from umt.engine import Engine, Workflow, open_database

    def greet(ctx, name):
        text = ctx.step("compose", lambda step: f"hello {name}")
        ctx.sleep("pause", "3s")
        signal = ctx.wait_for_signal("confirm", f"confirm:{name}", timeout="1h")
        return {"text": text, "confirmed": signal is not None}

    engine = Engine(open_database("sqlite:///umt.db"))
    engine.migrate()
    run = engine.start(Workflow("greet", "1", greet), "world").run
    engine.worker([...]).run(stop_event)
"""

from umt.engine.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock
from umt.engine.context import StepContext, StepTransaction, WorkflowContext
from umt.engine.durations import InvalidDuration, format_duration, parse_duration
from umt.engine.engine import Engine, open_database
from umt.engine.errors import (
    EngineError,
    IdempotencyConflict,
    InvalidSignalName,
    LeaseLost,
    PermanentError,
    ReplayDrift,
    RunCanceled,
    RunFinished,
    SchemaNotReady,
    SchemaTooNew,
    SignalKeyConflict,
    SingleHostDatabase,
    StepFailed,
    StepInterrupted,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
    UnknownRun,
    UnknownWorkflow,
    WorkerStopping,
    WorkflowDefinitionError,
)
from umt.engine.models import (
    FINAL_STATUSES,
    Attempt,
    LiveWorker,
    ReceivedSignal,
    Run,
    RunsPage,
    RunStatus,
    SignalResult,
    StartResult,
    Step,
    WaitingRun,
)
from umt.engine.retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from umt.engine.store.migrations import MigrationSet
from umt.engine.worker import DrainReport, Worker, WorkerOptions
from umt.engine.workflow import Registry, Workflow, workflow

__all__ = [
    "DEFAULT_RETRY",
    "FINAL_STATUSES",
    "NO_RETRY",
    "SYSTEM_CLOCK",
    "Attempt",
    "Clock",
    "DrainReport",
    "Engine",
    "EngineError",
    "FakeClock",
    "IdempotencyConflict",
    "InvalidDuration",
    "InvalidSignalName",
    "LeaseLost",
    "LiveWorker",
    "MigrationSet",
    "PermanentError",
    "ReceivedSignal",
    "Registry",
    "ReplayDrift",
    "RetryPolicy",
    "Run",
    "RunCanceled",
    "RunFinished",
    "RunStatus",
    "RunsPage",
    "SchemaNotReady",
    "SchemaTooNew",
    "SignalKeyConflict",
    "SignalResult",
    "SingleHostDatabase",
    "StartResult",
    "Step",
    "StepContext",
    "StepFailed",
    "StepInterrupted",
    "StepTransaction",
    "StoreCorrupt",
    "StoreError",
    "StoreReadOnly",
    "StoreUnavailable",
    "SystemClock",
    "UnknownRun",
    "UnknownWorkflow",
    "WaitingRun",
    "Worker",
    "WorkerOptions",
    "WorkerStopping",
    "Workflow",
    "WorkflowContext",
    "WorkflowDefinitionError",
    "format_duration",
    "open_database",
    "parse_duration",
    "workflow",
]
