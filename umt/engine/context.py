"""What workflow code and step bodies see of the engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, overload

from umt.engine.errors import LeaseLost, RunCanceled, WorkerStopping
from umt.engine.models import ReceivedSignal
from umt.engine.retry import RetryPolicy
from umt.engine.store.database import Session
from umt.engine.store.queries import Query, QuerySet
from umt.engine.store.values import BufferedStatement, Fence

if TYPE_CHECKING:
    from umt.engine.execution import RunExecution

T = TypeVar("T")
M = TypeVar("M")


class Interrupts:
    """Why the current execution must stop, set from the worker's other threads."""

    CANCELED = "canceled"
    LEASE_LOST = "lease_lost"
    STOPPING = "stopping"

    def __init__(self) -> None:
        self._reason: str | None = None
        self._lock = threading.Lock()
        self.event = threading.Event()

    @property
    def reason(self) -> str | None:
        return self._reason

    def set(self, reason: str) -> None:
        with self._lock:
            # Cancel and lease loss are final; a stop request must not hide them.
            if self._reason in (None, self.STOPPING):
                self._reason = reason
        self.event.set()

    def raise_if_set(self) -> None:
        reason = self._reason
        if reason == self.CANCELED:
            raise RunCanceled("the run was canceled")
        if reason == self.LEASE_LOST:
            raise LeaseLost("another worker took this run over")
        if reason == self.STOPPING:
            raise WorkerStopping("the worker is stopping and hands this run back")


class StepTransaction:
    """Business statements that commit in the same transaction as the step's result.

    They are collected while the body runs and executed, fenced, when the step completes, so
    they commit exactly once together with the result, or not at all.
    """

    def __init__(self) -> None:
        self.statements: list[BufferedStatement] = []

    def execute(self, query: Query, params: Mapping[str, object] | None = None) -> None:
        self.statements.append(BufferedStatement(query, dict(params or {})))


class StepContext:
    """Handed to a step body: who it is, and how to stay safe while doing side effects."""

    def __init__(
        self,
        execution: RunExecution,
        *,
        step_name: str,
        attempt: int,
        attempt_id: int,
        progress_interval: float,
    ) -> None:
        self._execution = execution
        self.step_name = step_name
        self.attempt = attempt
        self._attempt_id = attempt_id
        self._progress_interval = progress_interval
        self._last_progress = 0.0
        self.step_transaction = StepTransaction()

    @property
    def run_id(self) -> str:
        return self._execution.fence.run_id

    @property
    def worker_id(self) -> str:
        return self._execution.fence.worker_id

    @property
    def lease_epoch(self) -> int:
        return self._execution.fence.epoch

    @property
    def fence(self) -> Fence:
        return self._execution.fence

    @property
    def dialect(self) -> str:
        return self._execution.store.database.dialect

    def query_set(self, package: str) -> QuerySet:
        """A package's ``sql/<dialect>.sql`` queries for this database."""
        return self._execution.store.database.query_set(package)

    def now(self) -> datetime:
        """The engine's clock."""
        return self._execution.clock.now()

    @contextmanager
    def reader(self) -> Iterator[Session]:
        """An unfenced session for reads (e.g. the ledger of earlier attempts)."""
        with self._execution.store.database.autocommit() as session:
            yield session

    def check(self) -> None:
        """Raises ``RunCanceled``, ``LeaseLost`` or ``WorkerStopping`` when the body must stop.

        Call it between chunks of long work. The exceptions derive from ``BaseException``.
        """
        self._execution.interrupts.raise_if_set()

    def sleep(self, seconds: float) -> None:
        """Waits, but wakes at once (and raises) when the body must stop."""
        self._execution.interrupts.event.wait(seconds)
        self.check()

    def progress(self, done: float, total: float | None = None, **detail: Any) -> None:
        """Persists progress (rate-limited; a final ``done == total`` always goes through)."""
        self.check()
        now = time.monotonic()
        final = total is not None and done >= total
        if not final and now - self._last_progress < self._progress_interval:
            return
        self._last_progress = now
        value = {"done": done, "total": total, **detail}
        self._execution.report_progress(self._attempt_id, value)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A transaction that commits now, and only while this execution holds the run.

        For writes that must happen before the step ends (e.g. a ledger entry recording an
        intent before a side effect). Raises ``LeaseLost`` / ``RunCanceled`` otherwise.
        """
        self.check()
        with self._execution.fenced_session() as session:
            yield session


class WorkflowContext:
    """Handed to workflow code: durable steps, sleeps and signal waits."""

    def __init__(self, execution: RunExecution) -> None:
        self._execution = execution

    @property
    def run_id(self) -> str:
        return self._execution.claim.run.id

    @property
    def phase(self) -> str:
        return self._execution.fence.phase

    @property
    def run_status(self) -> str:
        """During compensation: ``canceled`` or ``failed``."""
        return self._execution.claim.run.status

    @property
    def run_error(self) -> dict[str, Any] | None:
        return self._execution.claim.run.error

    @property
    def main_results(self) -> dict[str, Any]:
        """During compensation: results of the main steps that had succeeded, by name."""
        return dict(self._execution.claim.main_results)

    @overload
    def step(
        self, name: str, body: Callable[[StepContext], Any], *, retry: RetryPolicy | None = None,
        result_type: None = None,
    ) -> Any: ...

    @overload
    def step(
        self, name: str, body: Callable[[StepContext], Any], *, retry: RetryPolicy | None = None,
        result_type: type[M],
    ) -> M: ...

    def step(
        self, name: str, body: Callable[[StepContext], Any], *, retry: RetryPolicy | None = None,
        result_type: type[Any] | None = None,
    ) -> Any:
        """Runs ``body`` once to success (at least once); replays return the recorded result.

        The result must be JSON-serializable (pydantic models are dumped); the value returned
        is the JSON form, validated into ``result_type`` when given, on first run and replay.
        """
        return self._execution.step(name, body, retry=retry, result_type=result_type)

    def sleep(self, name: str, duration: timedelta | str) -> None:
        """A durable timer: the run holds nothing while it sleeps and wakes once."""
        self._execution.sleep(name, duration)

    def wait_for_signal(
        self, name: str, signal: str, *, timeout: timedelta | str | None = None
    ) -> ReceivedSignal | None:
        """Waits for the signal ``signal``; ``None`` means the timeout passed first.

        A signal sent before the run got here is kept in the mailbox and received at once.
        """
        return self._execution.wait_for_signal(name, signal, timeout)
