"""Workers: registration, liveness, claims of due runs and their leases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from umt.engine.errors import SingleHostDatabase
from umt.engine.jsonvalues import canonical_json
from umt.engine.models import COMPENSATION, MAIN, Run, RunStatus, StepStatus
from umt.engine.store.base import StoreBase
from umt.engine.store.database import WORKERS_CHANNEL, Row, Session
from umt.engine.store.values import WORKER_PRESUMED_GONE, Claim, Fence, LeaseState, WorkerRecord


class Workers(StoreBase):
    """What a worker does about itself and its siblings, and how it takes runs."""

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

    def stop_worker(self, worker_id: str, host_key: str | None = None) -> None:
        """Records that the worker stopped; with its ``host_key``, other workers are told (they
        share the runs that notifications name among the workers they know)."""
        if host_key is None or not self.database.notifies:
            with self.database.autocommit() as session:
                session.rows("stop_worker", worker_id=worker_id, now=self.clock.now())
            return
        with self.database.transaction() as session:
            session.rows("stop_worker", worker_id=worker_id, now=self.clock.now())
            self.database.notify(session, WORKERS_CHANNEL, host_key)

    def live_workers_on_host(self, worker_id: str, host_key: str) -> list[WorkerRecord]:
        with self.database.autocommit() as session:
            rows = session.rows("live_workers_on_host", worker_id=worker_id, host_key=host_key)
        return [WorkerRecord(row["id"], row["pid"], row["process_start"]) for row in rows]

    def claim(
        self, worker_id: str, workflow_keys: Sequence[str], *, limit: int, lease: timedelta,
        held: Sequence[str] = (), take_leased: bool = True,
    ) -> list[Claim]:
        """Leases due runs to the worker, except those it ``held`` already and, without
        ``take_leased``, those whose lease looks expired (see ``claim_due``)."""
        return self._claim("claim_runs", worker_id, workflow_keys, limit=limit, lease=lease,
                           held=held, take_leased=take_leased)

    def claim_notified(
        self, worker_id: str, run_ids: Sequence[str], workflow_keys: Sequence[str], *,
        limit: int, lease: timedelta, held: Sequence[str] = (), take_leased: bool = True,
    ) -> list[Claim]:
        """As ``claim``, but only among ``run_ids`` (runs that notifications named; PostgreSQL
        only): those another worker took meanwhile are left out, and no other run is taken."""
        if not run_ids:
            return []
        return self._claim("claim_notified_runs", worker_id, workflow_keys, limit=limit,
                           lease=lease, held=held, take_leased=take_leased,
                           run_ids=list(run_ids))

    def _claim(
        self, query: str, worker_id: str, workflow_keys: Sequence[str], *, limit: int,
        lease: timedelta, held: Sequence[str], take_leased: bool, **more: object,
    ) -> list[Claim]:
        if limit <= 0 or not workflow_keys:
            return []
        now = self.clock.now()
        params: dict[str, object] = {
            "worker_id": worker_id, "workflow_keys": list(workflow_keys), "limit": limit,
            "now": now, "lease_expires_at": now + lease, "held": list(held),
            "take_leased": take_leased, **more,
        }
        with self.database.operation() as session:
            claimed = session.rows(query, **params)
            # Only a run claimed before can have recorded steps: a first claim reads nothing
            # more. Only this worker writes these runs' steps now.
            again = [row["id"] for row in claimed if row["claimed_before"]]
            step_rows = session.rows("steps_of_runs", run_ids=again) if again else []
        return [_claim_from(row, worker_id, step_rows) for row in claimed]

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
            if step["phase"] == MAIN and step["status"] == StepStatus.SUCCEEDED
        },
    )
