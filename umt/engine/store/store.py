"""The engine's operations on its tables, written once for every backend.

Each public method is one transaction. Methods that a worker calls while executing a run take a
``Fence`` and check, inside that same transaction, that the worker still holds the run's lease
at the epoch it claimed; otherwise nothing is written and ``LeaseLost`` (or ``RunCanceled``) is
raised.

The hot operations (a submit, a claim, a step's begin and end, parking, a run's end, a signal)
first try the backend's one-statement form (``Database.fast_path``: fence check, writes and
notification in one statement); when it has none, or its condition did not hold, the method
goes on with its transactional path, which is the reference and decides the precise outcome.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from umt.engine.clock import SYSTEM_CLOCK, Clock
from umt.engine.errors import (
    IdempotencyConflict,
    InvalidSignalName,
    LeaseLost,
    RunCanceled,
    RunFinished,
    SignalKeyConflict,
    SingleHostDatabase,
    StoreError,
    UnknownRun,
)
from umt.engine.jsonvalues import canonical_json
from umt.engine.models import (
    COMPENSATION,
    FINAL_STATUSES,
    MAIN,
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
from umt.engine.store.database import (
    CANCEL_CHANNEL,
    WORK_CHANNEL,
    WORKERS_CHANNEL,
    Database,
    Row,
    Session,
)
from umt.engine.store.driver_errors import UniqueViolation
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
    attempt_id: int
    result: Any


@dataclass(frozen=True)
class BufferedStatement:
    query: Query
    params: Mapping[str, object]


@dataclass(frozen=True)
class ChangeMarker:
    """What a live reader watches besides notifications (PostgreSQL)."""

    #: Changes whenever a writing transaction begins or ends.
    marker: str
    #: A step is being executed right now.
    busy: bool
    #: When the next run of the given workflows becomes due (its claim notifies nobody).
    next_due: datetime | None


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


class Store:
    def __init__(
        self,
        database: Database,
        clock: Clock = SYSTEM_CLOCK,
        *,
        signal_ttl: timedelta = timedelta(days=7),
    ) -> None:
        self.database = database
        self.clock = clock
        self.signal_ttl = signal_ttl

    # ------------------------------------------------------------------ runs (clients)

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
        params: dict[str, object] = {
            "id": str(uuid.uuid4()), "workflow_name": workflow, "workflow_version": version,
            "workflow_key": f"{workflow}@{version}", "input": input_json,
            "idempotency_key": idempotency_key, "compensable": compensable,
            "due_at": max(start_at, now) if start_at else now, "now": now,
        }

        def create(session: Session) -> StartResult:
            row = session.row("insert_run", **params)
            if row is not None:
                self.database.notify(session, WORK_CHANNEL, row["workflow_key"])
                return StartResult(Run.from_row(row), created=True)
            holder = session.row(
                "run_holding_key", workflow_name=workflow, idempotency_key=idempotency_key
            )
            if holder is None:
                raise StoreError("the idempotency key was released concurrently; try again")
            existing = Run.from_row(holder)
            if canonical_json(existing.input) != input_json:
                raise IdempotencyConflict(workflow, idempotency_key or "", existing.id)
            return StartResult(existing, created=False)

        if session is not None:
            return create(session)
        row = self._fast("insert_run_fast", **params)
        if row is not None:
            return StartResult(Run.from_row(row), created=True)
        with self.database.transaction() as own_session:
            return create(own_session)

    def get_run(self, run_id: str) -> Run:
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
        self, *, status: str | None, search: str | None,
        before: tuple[datetime, str] | None, limit: int,
    ) -> RunsPage:
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
        self.get_run(run_id)
        with self.database.autocommit() as session:
            return [Step.from_row(row) for row in session.rows("steps_of_run", run_id=run_id)]

    def attempts(self, run_id: str) -> list[Attempt]:
        self.get_run(run_id)
        with self.database.autocommit() as session:
            rows = session.rows("attempts_of_run", run_id=run_id)
        return [Attempt.from_row(row) for row in rows]

    def running_attempts(self, run_ids: Sequence[str]) -> list[Attempt]:
        ids = [run_id for run_id in run_ids if valid_run_id(run_id)]
        if not ids:
            return []
        with self.database.autocommit() as session:
            rows = session.rows("running_attempts_of_runs", run_ids=ids)
        return [Attempt.from_row(row) for row in rows]

    def cancel_run(self, run_id: str) -> Run:
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

    # ------------------------------------------------------------------ signals

    def send_signal(
        self,
        name: str,
        data: Any = None,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        ttl: timedelta | None = None,
    ) -> SignalResult:
        validate_signal_name(name)
        if run_id is not None and not valid_run_id(run_id):
            raise UnknownRun(run_id)
        try:
            return self._send_signal(name, data, run_id, idempotency_key, ttl)
        except UniqueViolation:
            # A sender of another name (which holds another name lock) used the same key
            # meanwhile and everything here was rolled back; decide again, seeing its signal.
            return self._send_signal(name, data, run_id, idempotency_key, ttl)

    def _send_signal(
        self, name: str, data: Any, run_id: str | None, idempotency_key: str | None,
        ttl: timedelta | None,
    ) -> SignalResult:
        data_json = canonical_json(data)
        now = self.clock.now()
        expires_at = now + (ttl or self.signal_ttl)
        signal_id = str(uuid.uuid4())
        payload = canonical_json({"signal_id": signal_id, "name": name, "data": data})
        with self.database.transaction() as session:
            session.rows("lock_signal_name", name=name)
            if idempotency_key is None and run_id is None:
                # After the lock, as a statement of its own: it must see a run that started
                # waiting while this sender waited for the lock.
                sent = self.database.fast_path("send_signal_fast", {
                    "id": signal_id, "name": name, "data": data_json, "payload": payload,
                    "now": now, "expires_at": expires_at,
                }, session)
                if sent:
                    fast_delivered = tuple(sent[0]["delivered_to"])
                    return SignalResult(signal_id, name, fast_delivered,
                                        kept=not fast_delivered, duplicate=False)
            if idempotency_key is not None:
                earlier = session.row("signal_by_key", idempotency_key=idempotency_key)
                if earlier is not None:
                    return _duplicate_outcome(earlier, name, run_id, data_json, idempotency_key)
            if run_id is not None:
                _require_signalable(session, run_id)
            delivered = self._deliver(session, name, run_id, payload, now)
            session.rows(
                "insert_signal", id=signal_id, name=name, target_run_id=run_id, data=data_json,
                idempotency_key=idempotency_key,
                status="delivered" if delivered else "kept",
                delivered_to=canonical_json(delivered), now=now, expires_at=expires_at,
                delivered_at=now if delivered else None,
            )
        return SignalResult(signal_id, name, tuple(delivered), kept=not delivered, duplicate=False)

    def _deliver(
        self, session: Session, name: str, run_id: str | None, payload: str, now: datetime
    ) -> list[str]:
        delivered: list[str] = []
        waiting = session.rows("waiting_steps_for_signal", name=name, target_run_id=run_id)
        for step in waiting:
            session.rows(
                "deliver_to_step", run_id=step["run_id"], phase=step["phase"],
                position=step["position"], result=payload, now=now,
            )
            woken = session.row("wake_run", run_id=step["run_id"], now=now)
            if woken is not None:
                self.database.notify(session, WORK_CHANNEL, woken["workflow_key"])
                delivered.append(step["run_id"])
        return delivered

    def runs_waiting_on(self, prefix: str) -> list[WaitingRun]:
        with self.database.autocommit() as session:
            rows = session.rows("runs_waiting_on_prefix", prefix=prefix)
        return [
            WaitingRun(row["run_id"], row["position"], row["workflow_name"], row["signal_name"],
                       row["wake_at"], row["detail"])
            for row in rows
        ]

    # ------------------------------------------------------------------ housekeeping

    def collect_garbage(self, older_than: timedelta) -> dict[str, int]:
        now = self.clock.now()
        cutoff = now - older_than
        with self.database.transaction() as session:
            return {
                "runs": session.count("delete_finished_runs", cutoff=cutoff),
                "signals": session.count("delete_old_signals", cutoff=cutoff, now=now),
                "workers": session.count("delete_stopped_workers", cutoff=cutoff),
            }

    # ------------------------------------------------------------------ workers

    def register_worker(
        self, worker_id: str, *, host_key: str, hostname: str, pid: int, process_start: str,
        workflows: Sequence[str],
    ) -> None:
        now = self.clock.now()
        with self.database.transaction() as session:
            if not self.database.multi_host:
                self._refuse_other_hosts(session, hostname, now)
            session.rows(
                "insert_worker", id=worker_id, host_key=host_key, hostname=hostname, pid=pid,
                process_start=process_start, workflows=canonical_json(list(workflows)),
                now=now,
            )
            # Running workers on that host re-read their list of siblings (Worker).
            self.database.notify(session, WORKERS_CHANNEL, host_key)

    def _refuse_other_hosts(self, session: Session, hostname: str, now: datetime) -> None:
        # Locks of a database file shared over the network are not reliable, and takeover
        # decisions need the workers' processes on this host: one machine only.
        other = session.row("live_workers_elsewhere", hostname=hostname,
                            since=now - WORKER_PRESUMED_GONE)
        if other is not None:
            raise SingleHostDatabase(
                f"{self.database.describe()} is in use by a worker on host "
                f"{other['hostname']!r} (alive at {other['heartbeat_at']:%Y-%m-%d %H:%M:%S}); "
                "an SQLite database serves workers on one machine only: use PostgreSQL "
                "(database.url) for workers on several machines"
            )

    def touch_worker(self, worker_id: str) -> None:
        with self.database.autocommit() as session:
            session.rows("touch_worker", worker_id=worker_id, now=self.clock.now())

    def stop_worker(self, worker_id: str) -> None:
        with self.database.autocommit() as session:
            session.rows("stop_worker", worker_id=worker_id, now=self.clock.now())

    def live_workers_on_host(self, worker_id: str, host_key: str) -> list[WorkerRecord]:
        with self.database.autocommit() as session:
            rows = session.rows("live_workers_on_host", worker_id=worker_id, host_key=host_key)
        return [WorkerRecord(row["id"], row["pid"], row["process_start"]) for row in rows]

    def live_workers(self) -> list[LiveWorker]:
        since = self.clock.now() - WORKER_PRESUMED_GONE
        with self.database.autocommit() as session:
            rows = session.rows("live_workers", since=since)
        return [
            LiveWorker(id=str(row["id"]), hostname=row["hostname"], pid=row["pid"],
                       workflows=list(row["workflows"]), started_at=row["started_at"],
                       heartbeat_at=row["heartbeat_at"])
            for row in rows
        ]

    def change_marker(self, workflow_keys: Sequence[str]) -> ChangeMarker:
        """PostgreSQL only: see ``ChangeMarker``."""
        with self.database.autocommit() as session:
            row = session.row("change_marker", workflow_keys=list(workflow_keys))
        assert row is not None
        return ChangeMarker(str(row["marker"]), bool(row["busy"]), row["next_due"])

    def reclaim_from_dead_workers(self, worker_ids: Sequence[str]) -> list[str]:
        """Mark workers dead and make the runs they held due now. Returns those runs."""
        if not worker_ids:
            return []
        now = self.clock.now()
        with self.database.transaction() as session:
            session.rows("mark_workers_dead", worker_ids=list(worker_ids), now=now)
            rows = session.rows("expire_leases_of_workers", worker_ids=list(worker_ids), now=now)
            if rows:
                self.database.notify(session, WORK_CHANNEL, "")
        return [row["id"] for row in rows]

    def claim(
        self, worker_id: str, workflow_keys: Sequence[str], *, limit: int, lease: timedelta
    ) -> list[Claim]:
        if limit <= 0 or not workflow_keys:
            return []
        now = self.clock.now()
        params: dict[str, object] = {
            "worker_id": worker_id, "workflow_keys": list(workflow_keys), "limit": limit,
            "now": now, "lease_expires_at": now + lease,
        }
        claimed = self.database.fast_path("claim_runs_fast", params)
        if claimed is not None:
            # Only a run claimed before can have recorded steps: a first claim reads nothing
            # more. The claim has committed; only this worker writes these runs' steps now.
            again = [row["id"] for row in claimed if row["claimed_before"]]
            step_rows: list[Row] = []
            if again:
                with self.database.autocommit() as session:
                    step_rows = session.rows("steps_of_runs", run_ids=again)
            return [_claim_from(row, worker_id, step_rows) for row in claimed]
        with self.database.transaction() as session:
            rows = session.rows("claim_runs", **params)
            if not rows:
                return []
            run_ids = [row["id"] for row in rows]
            session.rows("interrupt_running_attempts", run_ids=run_ids, now=now)
            session.rows("reset_running_steps", run_ids=run_ids, now=now)
            step_rows = session.rows("steps_of_runs", run_ids=run_ids)
        return [_claim_from(row, worker_id, step_rows) for row in rows]

    def next_due(self, workflow_keys: Sequence[str]) -> datetime | None:
        if not workflow_keys:
            return None
        with self.database.autocommit() as session:
            row = session.row("next_due", workflow_keys=list(workflow_keys))
        return row["next_due"] if row else None

    def extend_leases(
        self, worker_id: str, held: Mapping[str, int], lease: timedelta
    ) -> set[str]:
        """Extends the leases still held at the given epochs; returns the runs still held."""
        if not held:
            return set()
        now = self.clock.now()
        run_ids = list(held)
        with self.database.transaction() as session:
            rows = session.rows(
                "extend_leases", worker_id=worker_id, run_ids=run_ids,
                epochs=[held[run_id] for run_id in run_ids], now=now,
                lease_expires_at=now + lease,
            )
        return {row["id"] for row in rows}

    def lease_states(self, run_ids: Sequence[str]) -> dict[str, LeaseState]:
        if not run_ids:
            return {}
        with self.database.autocommit() as session:
            rows = session.rows("lease_states", run_ids=list(run_ids))
        return {
            row["id"]: LeaseState(row["status"], row["lease_owner"], row["lease_epoch"])
            for row in rows
        }

    # ------------------------------------------------------------------ fenced writes

    @contextmanager
    def fenced(self, fence: Fence) -> Iterator[Session]:
        """A transaction that commits only if ``fence`` still holds the run."""
        with self.database.transaction() as session:
            self._check_fence(session, fence)
            yield session

    def _check_fence(self, session: Session, fence: Fence) -> None:
        row = session.row("lock_run_for_fence", run_id=fence.run_id)
        if row is None:
            raise LeaseLost(f"run {fence.run_id} no longer exists")
        if row["lease_owner"] == fence.worker_id and row["lease_epoch"] == fence.epoch:
            return
        if row["status"] == RunStatus.CANCELED and fence.phase == MAIN:
            raise RunCanceled(f"run {fence.run_id} was canceled")
        raise LeaseLost(
            f"run {fence.run_id} is no longer held by this worker at epoch {fence.epoch}"
        )

    def begin_step(
        self, fence: Fence, position: int, name: str, *, completing: StepResult | None = None
    ) -> tuple[int, int]:
        """Records that an attempt of a step starts, and commits ``completing`` (the previous
        step's result) with it. Returns (attempt id, attempt number)."""
        now = self.clock.now()
        fast = self._fast("begin_step_fast", **self._fenced_step_key(fence, position), name=name,
                          **self._completing(completing), now=now)
        if fast is not None:
            return int(fast["id"]), int(fast["attempt"])
        with self.fenced(fence) as session:
            if completing is not None:
                self._complete_step(session, fence, completing, (), now)
            key = self._step_key(fence, position)
            step = session.row("get_step", **key)
            if step is None:
                session.rows(
                    "insert_step", **key, name=name, kind="step", status="running",
                    result=None, signal_name=None, wake_at=None, now=now, finished_at=None,
                )
                failures = 0
            else:
                session.rows("set_step_status", **key, status="running", now=now,
                             finished_at=None)
                failures = step["failures"]
            attempt = session.row(
                "insert_attempt", **key, attempt=failures + 1, worker_id=fence.worker_id,
                lease_epoch=fence.epoch, now=now,
            )
            assert attempt is not None
        return int(attempt["id"]), failures + 1

    def complete_step(
        self, fence: Fence, position: int, attempt_id: int, result: Any,
        statements: Sequence[BufferedStatement] = (),
    ) -> None:
        """Commits a step's result together with the step's buffered business statements."""
        now = self.clock.now()
        result_json = canonical_json(result)
        params = {**self._fenced_step_key(fence, position), "attempt_id": attempt_id,
                  "result": result_json, "now": now}
        if not statements and self._fast("complete_step_fast", **params) is not None:
            return
        with self.database.transaction() as session:
            # Business statements need a transaction; the one-statement form still saves the
            # fence read, the step read and two writes in it.
            done = (self.database.fast_path("complete_step_fast", params, session)
                    if statements else None)
            if done:
                if done[0]["completed"]:
                    for statement in statements:
                        session.execute(statement.query, statement.params)
                return
            self._check_fence(session, fence)
            self._complete_step(session, fence, StepResult(position, attempt_id, result),
                                statements, now)

    def _complete_step(
        self, session: Session, fence: Fence, step: StepResult,
        statements: Sequence[BufferedStatement], now: datetime,
    ) -> None:
        key = self._step_key(fence, step.position)
        recorded = session.row("get_step", **key)
        if recorded is not None and recorded["status"] == "succeeded":
            return  # a retried commit whose first try did commit
        for statement in statements:
            session.execute(statement.query, statement.params)
        session.rows("succeed_step", **key, result=canonical_json(step.result), now=now)
        session.rows("finish_attempt", attempt_id=step.attempt_id, status="succeeded", now=now,
                     error=None)

    def fail_step(
        self, fence: Fence, position: int, attempt_id: int, error: dict[str, Any],
        *, retry_in: timedelta | None, run_status: str,
    ) -> int:
        """Records a failed attempt. With ``retry_in`` the run is released until then;
        otherwise the step is failed for good. Returns the step's failure count."""
        now = self.clock.now()
        with self.fenced(fence) as session:
            key = self._step_key(fence, position)
            session.rows("finish_attempt", attempt_id=attempt_id, status="failed", now=now,
                         error=canonical_json(error))
            row = session.row(
                "count_step_failure", **key, error=canonical_json(error),
                status="retrying" if retry_in is not None else "failed", now=now,
                finished_at=None if retry_in is not None else now,
            )
            assert row is not None
            if retry_in is not None:
                self._release(session, fence, status=run_status, due_at=now + retry_in)
        return int(row["failures"])

    def start_sleep(self, fence: Fence, position: int, name: str, wake_at: datetime) -> bool:
        """Records a durable timer. Returns whether the run is now parked (False: already due)."""
        now = self.clock.now()
        due = wake_at <= now
        if self._fast("start_sleep_fast", **self._fenced_step_key(fence, position), name=name,
                      wake_at=wake_at, park=not due, now=now) is not None:
            return not due
        with self.fenced(fence) as session:
            key = self._step_key(fence, position)
            session.rows("insert_step", **key, name=name, kind="sleep",
                         status="succeeded" if due else "sleeping", result=None,
                         signal_name=None, wake_at=wake_at, now=now,
                         finished_at=now if due else None)
            if not due:
                self._release(session, fence, status=RunStatus.SLEEPING, due_at=wake_at)
        return not due

    def finish_parked_step(self, fence: Fence, position: int, status: str) -> None:
        """A timer fired (``succeeded``) or a signal wait timed out (``timed_out``)."""
        now = self.clock.now()
        if self._fast("set_step_status_fast", **self._fenced_step_key(fence, position),
                      status=status, now=now, finished_at=now) is not None:
            return
        with self.fenced(fence) as session:
            session.rows("set_step_status", **self._step_key(fence, position), status=status,
                         now=now, finished_at=now)

    def park_again(self, fence: Fence, status: str, due_at: datetime) -> None:
        """The run was claimed before its timer: park it again without doing anything."""
        if self._fast("release_run_fast", **self._fence_key(fence), status=status,
                      due_at=due_at, now=self.clock.now()) is not None:
            return
        with self.fenced(fence) as session:
            self._release(session, fence, status=status, due_at=due_at)

    def wait_for_signal(
        self, fence: Fence, position: int, name: str, signal_name: str,
        deadline: datetime | None,
    ) -> ReceivedSignal | None:
        """Consumes a kept signal if there is one; otherwise parks the run until one arrives
        (or until ``deadline``; ``None`` waits without limit)."""
        validate_signal_name(signal_name)
        now = self.clock.now()
        with self.database.transaction() as session:
            # The name lock comes before the run lock, in the same order as in send_signal.
            session.rows("lock_signal_name", name=signal_name)
            self._check_fence(session, fence)
            key = self._step_key(fence, position)
            step = session.row("get_step", **key)
            kept = session.row("take_kept_signal", name=signal_name, run_id=fence.run_id,
                               now=now)
            if kept is not None:
                received = ReceivedSignal(kept["id"], signal_name, kept["data"])
                session.rows("consume_signal", signal_id=kept["id"],
                             delivered_to=canonical_json([fence.run_id]), now=now)
                result = canonical_json(
                    {"signal_id": received.id, "name": signal_name, "data": received.data}
                )
                if step is None:
                    session.rows("insert_step", **key, name=name, kind="signal",
                                 status="succeeded", result=result, signal_name=signal_name,
                                 wake_at=deadline, now=now, finished_at=now)
                else:
                    session.rows("deliver_to_step", **key, result=result, now=now)
                return received
            if step is None:
                session.rows("insert_step", **key, name=name, kind="signal", status="waiting",
                             result=None, signal_name=signal_name, wake_at=deadline, now=now,
                             finished_at=None)
            self._release(session, fence, status=RunStatus.WAITING, due_at=deadline)
        return None

    def complete_run(
        self, fence: Fence, output: Any, *, completing: StepResult | None = None
    ) -> None:
        """The run succeeded; ``completing`` (its last step's result) commits with it."""
        output_json = canonical_json(output)
        now = self.clock.now()
        if self._fast("complete_run_fast", **self._fence_key(fence), phase=fence.phase,
                      output=output_json, **self._completing(completing), now=now) is not None:
            return
        with self.fenced(fence) as session:
            if completing is not None:
                self._complete_step(session, fence, completing, (), now)
            session.rows("complete_run", run_id=fence.run_id, output=output_json, now=now)

    def fail_run(self, fence: Fence, error: dict[str, Any], *, compensate: bool) -> None:
        with self.fenced(fence) as session:
            row = session.row("fail_run", run_id=fence.run_id, error=canonical_json(error),
                              compensate=compensate, now=self.clock.now())
            if compensate and row is not None:
                self.database.notify(session, WORK_CHANNEL, row["workflow_key"])

    def finish_compensation(self, fence: Fence, *, error: dict[str, Any] | None) -> None:
        with self.fenced(fence) as session:
            session.rows(
                "finish_compensation", run_id=fence.run_id, now=self.clock.now(),
                compensation="failed" if error else "succeeded",
                error=canonical_json({"compensation": error}) if error else None,
            )

    def hand_back(self, fence: Fence, attempt_id: int | None, run_status: str) -> None:
        """A stopping worker returns a run it could not finish; it is due again at once."""
        now = self.clock.now()
        with self.fenced(fence) as session:
            if attempt_id is not None:
                session.rows("finish_attempt", attempt_id=attempt_id, status="handed_back",
                             now=now, error=None)
            session.rows("reset_running_steps", run_ids=[fence.run_id], now=now)
            self._release(session, fence, status=run_status, due_at=now)

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

    def _release(
        self, session: Session, fence: Fence, *, status: str, due_at: datetime | None
    ) -> None:
        row = session.row("release_run", run_id=fence.run_id, status=status, due_at=due_at,
                          now=self.clock.now())
        if row is not None and due_at is not None:
            self.database.notify(session, WORK_CHANNEL, row["workflow_key"])

    def _fast(self, query_name: str, /, **params: object) -> Row | None:
        """The first row of an operation's one-statement form in autocommit; ``None``: the
        backend has none, or its condition did not hold (then take the transactional path)."""
        rows = self.database.fast_path(query_name, params)
        return rows[0] if rows else None

    @staticmethod
    def _step_key(fence: Fence, position: int) -> dict[str, object]:
        return {"run_id": fence.run_id, "phase": fence.phase, "position": position}

    @staticmethod
    def _fence_key(fence: Fence) -> dict[str, object]:
        return {"run_id": fence.run_id, "worker_id": fence.worker_id, "lease_epoch": fence.epoch}

    @classmethod
    def _fenced_step_key(cls, fence: Fence, position: int) -> dict[str, object]:
        return {**cls._fence_key(fence), "phase": fence.phase, "position": position}

    @staticmethod
    def _completing(step: StepResult | None) -> dict[str, object]:
        """Parameters of a fast form that also commits an earlier step's result (NULL: none)."""
        if step is None:
            return {"completed_position": None, "completed_attempt_id": None,
                    "completed_result": None}
        return {"completed_position": step.position, "completed_attempt_id": step.attempt_id,
                "completed_result": canonical_json(step.result)}


def _require_signalable(session: Session, run_id: str) -> None:
    run = session.row("lock_run", run_id=run_id)
    if run is None:
        raise UnknownRun(run_id)
    if run["status"] in FINAL_STATUSES:
        raise RunFinished(run_id, run["status"], "signal")


def _duplicate_outcome(
    earlier: Row, name: str, run_id: str | None, data_json: str, key: str
) -> SignalResult:
    same = (
        earlier["name"] == name
        and earlier["target_run_id"] == run_id
        and canonical_json(earlier["data"]) == data_json
    )
    if not same:
        raise SignalKeyConflict(key)
    return SignalResult(
        earlier["id"], name, tuple(earlier["delivered_to"]),
        kept=earlier["status"] == "kept", duplicate=True,
    )


def _claim_from(row: Row, worker_id: str, step_rows: list[Row]) -> Claim:
    run = Run.from_row(row)
    phase = COMPENSATION if run.status in (RunStatus.CANCELED, RunStatus.FAILED) else MAIN
    mine = [step for step in step_rows if step["run_id"] == run.id]
    return Claim(
        run=run,
        fence=Fence(run.id, worker_id, int(row["lease_epoch"]), phase),
        compensable=bool(row["compensable"]),
        steps={step["position"]: step for step in mine if step["phase"] == phase},
        main_results={
            step["name"]: step["result"]
            for step in mine
            if step["phase"] == MAIN and step["status"] == "succeeded"
        },
    )
