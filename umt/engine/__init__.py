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

from umt.engine.clock import (
    SKEW_FIX,
    SYSTEM_CLOCK,
    Clock,
    FakeClock,
    ServerClock,
    SystemClock,
    skew_bound,
)
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
from umt.engine.hostinfo import host_key
from umt.engine.jsonvalues import canonical_json
from umt.engine.models import (
    FINAL_STATUSES,
    Attempt,
    AttemptStatus,
    CompensationStatus,
    LiveWorker,
    ReceivedSignal,
    Run,
    RunsPage,
    RunStatus,
    SignalResult,
    StartResult,
    Step,
    StepStatus,
    WaitingRun,
)
from umt.engine.retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from umt.engine.store.database import Database, Listener, Row, Session
from umt.engine.store.migrations import MigrationSet
from umt.engine.store.queries import Query, QuerySet
from umt.engine.store.urls import (
    DatabaseTarget,
    InvalidDatabaseUrl,
    mask_database_url,
    parse_database_url,
)
from umt.engine.store.values import like_escaped, validate_signal_name
from umt.engine.worker import DrainReport, Worker, WorkerOptions
from umt.engine.workflow import Registry, Workflow, workflow

__all__ = [
    "DEFAULT_RETRY",
    "FINAL_STATUSES",
    "NO_RETRY",
    "SKEW_FIX",
    "SYSTEM_CLOCK",
    "Attempt",
    "AttemptStatus",
    "Clock",
    "CompensationStatus",
    "Database",
    "DatabaseTarget",
    "DrainReport",
    "Engine",
    "EngineError",
    "FakeClock",
    "IdempotencyConflict",
    "InvalidDatabaseUrl",
    "InvalidDuration",
    "InvalidSignalName",
    "LeaseLost",
    "Listener",
    "LiveWorker",
    "MigrationSet",
    "PermanentError",
    "Query",
    "QuerySet",
    "ReceivedSignal",
    "Registry",
    "ReplayDrift",
    "RetryPolicy",
    "Row",
    "Run",
    "RunCanceled",
    "RunFinished",
    "RunStatus",
    "RunsPage",
    "SchemaNotReady",
    "SchemaTooNew",
    "ServerClock",
    "Session",
    "SignalKeyConflict",
    "SignalResult",
    "SingleHostDatabase",
    "StartResult",
    "Step",
    "StepContext",
    "StepFailed",
    "StepInterrupted",
    "StepStatus",
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
    "canonical_json",
    "format_duration",
    "host_key",
    "like_escaped",
    "mask_database_url",
    "open_database",
    "parse_database_url",
    "parse_duration",
    "skew_bound",
    "validate_signal_name",
    "workflow",
]
