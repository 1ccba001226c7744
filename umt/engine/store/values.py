"""What the store's operations take and return, and the checks of what callers pass in."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from umt.engine.errors import InvalidSignalName
from umt.engine.models import Run
from umt.engine.store.database import Row
from umt.engine.store.queries import Query

MAX_SIGNAL_NAME = 300
#: A worker id no worker has, for queries that exclude "this worker" when there is none.
NO_WORKER = "00000000-0000-0000-0000-000000000000"

#: A worker records that it is alive this often (``workers.heartbeat_at``).
WORKER_TOUCH_INTERVAL = timedelta(seconds=30)
#: A worker unheard of for this long no longer keeps one-machine databases to its host.
WORKER_PRESUMED_GONE = 3 * WORKER_TOUCH_INTERVAL


@dataclass(frozen=True)
class Fence:
    """Proof of ownership a worker presents with every write it makes for a run."""

    run_id: str
    worker_id: str
    epoch: int
    phase: str


@dataclass(frozen=True)
class Claim:
    run: Run
    fence: Fence
    compensable: bool
    #: Recorded steps of the phase being executed, by position.
    steps: dict[int, Row] = field(default_factory=dict)
    #: Results of the main phase's succeeded steps, by name (for compensation).
    main_results: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    """A step's result that commits with the next operation of its execution (the next step's
    start, or the run's end) instead of in a transaction of its own."""

    position: int
    #: None: a timer that fired (a sleep step: no attempt, and no result to store).
    attempt_id: int | None
    result: Any


@dataclass(frozen=True)
class BufferedStatement:
    query: Query
    params: Mapping[str, object]


@dataclass(frozen=True)
class LeaseState:
    status: str
    owner: str | None
    epoch: int


@dataclass(frozen=True)
class WorkerRecord:
    id: str
    pid: int
    process_start: str


def valid_run_id(run_id: str) -> bool:
    try:
        uuid.UUID(run_id)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


def validate_signal_name(name: str) -> None:
    if not name or len(name) > MAX_SIGNAL_NAME:
        raise InvalidSignalName(f"signal name must be 1 to {MAX_SIGNAL_NAME} characters")
    if any(character.isspace() or not character.isprintable() for character in name):
        raise InvalidSignalName(
            f"signal name {name!r} must not contain spaces or control characters"
        )


def like_escaped(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern (escape character: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def error_json(error: BaseException) -> dict[str, Any]:
    return {"type": type(error).__name__, "message": str(error) or type(error).__name__}
